"""The engine: runs turns on the measuring event loop. One turn, the fixture runner, load
shapes (closed and open loops), the loop-lag probe, progress events and live sessions."""
