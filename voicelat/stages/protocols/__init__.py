"""Sans-I/O halves of the websocket providers: messages in (with their arrival stamps), stage
events out, and what to send next. No socket, no event loop, no clock: the driver in
:mod:`voicelat.stages._ws` does the I/O and the stamping."""
