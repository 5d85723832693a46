"""A stand-in for the ADB server on 127.0.0.1: the host side of ADB's socket protocol (SERVICES.TXT / protocol.txt
of AOSP's adb), enough for adbutils' client to list devices and run shell commands on one fake phone.

Each request is a 4-hex-digit length and the service name; the server answers ``OKAY`` or ``FAIL`` plus a
length-prefixed message. ``host:version`` and ``host:devices`` answer length-prefixed data; ``host:tport:serial:S``
switches the connection to device S (``OKAY`` plus an 8-byte transport id), after which ``shell:CMD`` answers CMD's
output until the connection closes. Every shell command is recorded in ``commands``; ``outputs`` maps a command
(or its first word) to its output.
"""

from __future__ import annotations

import io
import socket
import socketserver
import threading

from PIL import Image


def _block(text: str | bytes) -> bytes:
    data = text.encode() if isinstance(text, str) else text
    return f"{len(data):04x}".encode() + data


class AdbStandIn:
    def __init__(self, serials=("emulator-5554",), screen=(1080, 2400), focus="com.android.settings"):
        self.serials = list(serials)
        self.commands: list[tuple[str, str]] = []  # (serial, shell command)
        png = io.BytesIO()
        Image.new("RGB", screen, (10, 120, 200)).save(png, format="PNG")
        self.outputs: dict[str, bytes | str] = {
            "screencap -p": png.getvalue(),
            "wm size": f"Physical size: {screen[0]}x{screen[1]}\n",
            "dumpsys window": f"  mCurrentFocus=Window{{1f2e u0 {focus}/{focus}.MainActivity}}\n"
            f"  mFocusedApp=ActivityRecord{{9a8 u0 {focus}/.MainActivity t12}}\n",
            "settings get secure default_input_method": "com.google.android.inputmethod.latin/.LatinIME\n",
        }
        standin = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                standin._serve(self.request)

        socketserver.ThreadingTCPServer.allow_reuse_address = True
        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    def shell_commands(self, serial: str | None = None) -> list[str]:
        return [c for s, c in self.commands if serial is None or s == serial]

    def _serve(self, conn: socket.socket) -> None:
        serial = None
        while True:
            request = _read_request(conn)
            if request is None:
                return
            if request == "host:version":
                conn.sendall(b"OKAY" + _block(f"{41:04x}"))
                return
            if request in ("host:devices", "host:devices-l"):
                conn.sendall(b"OKAY" + _block("".join(f"{s}\tdevice\n" for s in self.serials)))
                return
            if request.startswith("host:tport:serial:"):
                wanted = request.split(":", 3)[3]
                if wanted not in self.serials:
                    conn.sendall(b"FAIL" + _block(f"device '{wanted}' not found"))
                    return
                serial = wanted
                conn.sendall(b"OKAY" + (1).to_bytes(8, "little"))
                continue  # the next request on this connection goes to the device
            if request.startswith("shell:") and serial is not None:
                command = request[len("shell:") :]
                self.commands.append((serial, command))
                output = self.outputs.get(command, self.outputs.get(command.split(" ")[0], ""))
                conn.sendall(b"OKAY" + (output.encode() if isinstance(output, str) else output))
                return  # shell output ends when the connection closes
            conn.sendall(b"FAIL" + _block(f"unsupported service {request!r}"))
            return


def _read_request(conn: socket.socket) -> str | None:
    header = _read_exact(conn, 4)
    if header is None:
        return None
    body = _read_exact(conn, int(header, 16))
    return None if body is None else body.decode()


def _read_exact(conn: socket.socket, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data
