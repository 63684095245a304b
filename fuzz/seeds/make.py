#!/usr/bin/env python3
"""Writes the seed inputs of each fuzz target into fuzz/seeds/TARGET/ (run from anywhere).

Seeds are well-formed exchanges, so the fuzzer starts from inputs that reach deep into each
parser; every target's first byte (two for hpack) picks split points, as its entry documents.
"""
import os
import struct

here = os.path.dirname(os.path.abspath(__file__))


def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def varint(n):
    if n < 64:
        return bytes([n])
    if n < 16384:
        return struct.pack(">H", 0x4000 | n)
    return struct.pack(">I", 0x80000000 | n)


def h3_frame(ty, payload):
    return varint(ty) + varint(len(payload)) + payload


PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
# :status 200, then content-length: 5 as a literal with indexing (static name 28).
H2_STATUS = b"\x88" + b"\x5c\x015"
# GET http://localhost/ with a literal :authority (static name 1, indexed).
H2_GET = b"\x82\x86\x84\x41\x09localhost"
H2_POST = b"\x83\x86\x44\x05/echo\x41\x09localhost"
# QPACK: required insert count 0, base 0, then :status 200 (static 25) and content-length (4).
QPACK_200 = b"\x00\x00\xd9\x54\x015"

seeds = {
    "h1_response": [
        b"\x10HTTP/1.1 200 OK\r\nContent-Length: 5\r\nServer: h2o\r\n\r\nhello",
        b"\x08HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"\x03" + b"5\r\nhello\r\n0\r\nx-trailer: 1\r\n\r\n",
        b"\x02HTTP/1.0 204 No Content\r\nConnection: keep-alive\r\n\r\n",
        b"\x20HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nConnection: close\r\n\r\nbody",
    ],
    "h2_client": [
        frame(1, 4, 1, H2_STATUS) + frame(0, 1, 1, b"hello"),
        frame(1, 0, 1, H2_STATUS[:1]) + frame(9, 4, 1, H2_STATUS[1:]) + frame(0, 0, 1, b"he")
        + frame(8, 0, 0, b"\x00\x01\x00\x00") + frame(0, 1, 1, b"llo"),
        frame(4, 0, 0, b"\x00\x03\x00\x00\x00\x01" + b"\x00\x04\x00\x00\x00\x10")
        + frame(6, 0, 0, b"12345678") + frame(3, 0, 1, b"\x00\x00\x00\x07")
        + frame(7, 0, 0, b"\x00\x00\x00\x03\x00\x00\x00\x00"),
    ],
    "h3_response": [
        b"\x04" + h3_frame(1, QPACK_200) + h3_frame(0, b"hello"),
        b"\x01" + h3_frame(1, b"\x00\x00\xc0\x5f\x0b") + h3_frame(1, QPACK_200) + h3_frame(0x21, b"grease")
        + h3_frame(0, b"he") + h3_frame(0, b"llo") + h3_frame(1, b"\x00\x00\x2f\x00x\x01y"),
        b"\x02\x00" + h3_frame(4, varint(6) + varint(0)) + h3_frame(7, varint(8)),
    ],
    "h2_server": [
        b"\x08" + PREFACE + frame(4, 0, 0) + frame(1, 5, 1, H2_GET) + frame(4, 1, 0),
        b"\x10" + PREFACE + frame(4, 0, 0, b"\x00\x01\x00\x00\x00\x00") + frame(1, 4, 1, H2_POST)
        + frame(0, 0, 1, b"abc") + frame(0, 1, 1, b"def") + frame(1, 5, 3, H2_GET)
        + frame(3, 0, 3, b"\x00\x00\x00\x08") + frame(8, 0, 0, b"\x00\x00\x10\x00"),
        b"\x06" + PREFACE + frame(4, 0, 0) + frame(1, 1, 1, H2_GET[:3]) + frame(9, 4, 1, H2_GET[3:])
        + frame(6, 0, 0, b"pingpong") + frame(7, 0, 0, b"\x00\x00\x00\x00\x00\x00\x00\x00"),
    ],
    "server_opening": [
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        PREFACE,
        b"GET / HTTP/2.0\r\n",
        b"size=1k&delay=1ms:90,5ms:10&status=503:10,429:5&close=1:50&header=x-a:b",
    ],
    # Two bytes (split, table limit / 32), then RFC 7541 C.4.1 and C.6.1 blocks.
    "hpack": [
        b"\x08\x80" + bytes.fromhex("828684418cf1e3c2e5f23a6ba0ab90f4ff"),
        b"\x20\x08" + bytes.fromhex("488264025885aec3771a4b6196d07abe941054d444a8200595040b8166e082a62d1bff6e919d29ad171863c78f0b97c8e9ae82ae43d3"),
        b"\x00\x80" + bytes.fromhex("3fe11f82"),
    ],
}

for target, inputs in seeds.items():
    os.makedirs(os.path.join(here, target), exist_ok=True)
    for i, data in enumerate(inputs):
        with open(os.path.join(here, target, f"seed-{i}"), "wb") as f:
            f.write(data)
