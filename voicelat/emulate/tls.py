"""A throwaway self-signed certificate for ``voicelat serve --tls``.

Some official SDKs only speak TLS (google-genai's live client always dials ``wss://``), so an
emulator outside a test process must serve TLS for them. The certificate is made at start-up
for the listening host (and ``localhost``/``127.0.0.1``), valid for two days, with the
``cryptography`` package when it is installed, else with the ``openssl`` binary. Its path is
printed so a client can trust it (``SSL_CERT_FILE=PATH`` for Python's default context, or
``ssl.create_default_context(cafile=PATH)``). The key never leaves the directory it was made in.
"""

from __future__ import annotations

import datetime
import ipaddress
import shutil
import ssl
import subprocess
from pathlib import Path

from voicelat.core.base.errors import InfraError

__all__ = ["client_context", "self_signed", "server_context"]


def _names(host: str) -> tuple[list[str], list[str]]:
    """(DNS names, IP addresses) the certificate is valid for."""
    dns, ips = ["localhost"], ["127.0.0.1", "::1"]
    try:
        ipaddress.ip_address(host)
        if host not in ips:
            ips.append(host)
    except ValueError:
        if host not in dns:
            dns.append(host)
    return dns, ips


def self_signed(directory: Path, host: str = "127.0.0.1") -> tuple[Path, Path]:
    """Write ``cert.pem`` and ``key.pem`` for ``host`` into ``directory``; return their paths.

    One clear :class:`InfraError` (exit 3) when neither ``cryptography`` nor ``openssl`` can
    make one."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    try:
        _with_cryptography(cert, key, host)
    except ImportError:
        _with_openssl(cert, key, host)
    key.chmod(0o600)
    return cert, key


def _with_cryptography(cert_path: Path, key_path: Path, host: str) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    dns, ips = _names(host)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "voicelat emulator")])
    now = datetime.datetime.now(datetime.UTC)
    alt = [x509.DNSName(d) for d in dns] + [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.SubjectAlternativeName(alt), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _with_openssl(cert_path: Path, key_path: Path, host: str) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise InfraError(
            "serve --tls needs the `cryptography` package or the `openssl` binary to make its "
            "certificate: pip install cryptography"
        )
    dns, ips = _names(host)
    alt = ",".join([*(f"DNS:{d}" for d in dns), *(f"IP:{i}" for i in ips)])
    done = subprocess.run(
        [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-days", "2", "-subj", "/CN=voicelat emulator",
         "-addext", f"subjectAltName={alt}", "-keyout", str(key_path), "-out", str(cert_path)],
        capture_output=True, text=True, check=False, timeout=30,
    )  # fmt: skip
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise InfraError(f"serve --tls: openssl could not make a certificate: {last}")


def server_context(cert: Path, key: Path) -> ssl.SSLContext:
    """The server side of ``--tls``."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    return ctx


def client_context(cert: Path) -> ssl.SSLContext:
    """A client context that trusts exactly this certificate."""
    return ssl.create_default_context(cafile=str(cert))
