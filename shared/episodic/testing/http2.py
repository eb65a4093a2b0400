"""A bare HTTP/2 peer that resets gRPC calls, for testing how clients take a stream reset.

gRPC servers answer with trailers; a reset stream (an HTTP/2 RST_STREAM frame) comes from
a transport or an intermediary giving up on a call, and grpcio reports it as INTERNAL
``Stream removed`` — indistinguishable by code from a server's own bug. The SDK tells the
two apart (:func:`episodic.sdk.errors.translate_error`); this peer produces the real
frames on a real socket so tests can check it does.

:class:`ResettingServer` speaks just enough of RFC 9113 for a gRPC client: the
connection preface and SETTINGS, PING acknowledgements, and for each new stream either a
RST_STREAM with the chosen error code (the first ``resets`` streams) or a successful
unary answer with an empty message (headers, one DATA frame, trailers ``grpc-status: 0``).
Request headers are never decoded: the answer does not depend on them, and the answer's
own headers are HPACK literals that touch no dynamic table.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from dataclasses import dataclass, field

__all__ = ["INTERNAL_ERROR", "ResettingServer"]

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY = 0x0, 0x1, 0x3, 0x4, 0x6, 0x7
END_STREAM = ACK = 0x1
END_HEADERS = 0x4

#: RFC 9113 §7 error code: what grpcio reports as INTERNAL "Stream removed".
INTERNAL_ERROR = 0x2


def _frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return (
        struct.pack(">I", len(payload))[1:]
        + bytes([kind, flags])
        + struct.pack(">I", stream)
        + payload
    )


def _literal(name: bytes, value: bytes) -> bytes:
    """An HPACK literal header field without indexing, new name (RFC 7541 §6.2.2)."""
    assert len(name) < 127 and len(value) < 127
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value


_RESPONSE_HEADERS = b"\x88" + _literal(b"content-type", b"application/grpc")  # :status 200
_TRAILERS = _literal(b"grpc-status", b"0")
_EMPTY_MESSAGE = b"\x00\x00\x00\x00\x00"  # uncompressed, length 0


@dataclass
class ResettingServer:
    """Listens on 127.0.0.1; resets the first ``resets`` streams with ``error_code``, then
    answers every call OK with an empty message. ``streams`` counts the calls it saw."""

    resets: int
    error_code: int = INTERNAL_ERROR
    streams: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _listener: socket.socket | None = None
    _connections: list[socket.socket] = field(default_factory=list)

    @property
    def address(self) -> str:
        assert self._listener is not None
        return f"127.0.0.1:{self._listener.getsockname()[1]}"

    def __enter__(self) -> ResettingServer:
        self._listener = socket.create_server(("127.0.0.1", 0))
        threading.Thread(target=self._accept, name="http2-accept", daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._listener is not None
        self._listener.close()
        with self._lock:
            for conn in self._connections:
                with contextlib.suppress(OSError):
                    conn.close()

    def _accept(self) -> None:
        assert self._listener is not None
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return  # closed
            with self._lock:
                self._connections.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError, ConnectionError), conn:
            reader = conn.makefile("rb")
            if reader.read(len(PREFACE)) != PREFACE:
                return
            conn.sendall(_frame(SETTINGS, 0, 0))
            while True:
                header = reader.read(9)
                if len(header) < 9:
                    return
                length = int.from_bytes(header[:3], "big")
                kind, flags = header[3], header[4]
                stream = int.from_bytes(header[5:9], "big") & 0x7FFFFFFF
                payload = reader.read(length)
                if kind == SETTINGS and not flags & ACK:
                    conn.sendall(_frame(SETTINGS, ACK, 0))
                elif kind == PING and not flags & ACK:
                    conn.sendall(_frame(PING, ACK, 0, payload))
                elif kind == HEADERS:
                    conn.sendall(self._answer(stream))
                elif kind == GOAWAY:
                    return

    def _answer(self, stream: int) -> bytes:
        with self._lock:
            self.streams += 1
            reset = self.streams <= self.resets
        if reset:
            return _frame(RST_STREAM, 0, stream, struct.pack(">I", self.error_code))
        return (
            _frame(HEADERS, END_HEADERS, stream, _RESPONSE_HEADERS)
            + _frame(DATA, 0, stream, _EMPTY_MESSAGE)
            + _frame(HEADERS, END_HEADERS | END_STREAM, stream, _TRAILERS)
        )
