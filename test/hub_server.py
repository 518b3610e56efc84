"""A local HTTP server that answers like the Hugging Face Hub for one model repository.

Only what ``huggingface_hub`` uses to list and download files (point ``HF_ENDPOINT`` at it):

* ``GET /api/models/<repo>/revision/<rev>``: the repository's commit and its files, with the
  hub's checksums (``lfs.sha256`` for weights, the git ``blobId`` for small files);
* ``HEAD`` / ``GET /<repo>/resolve/<rev>/<path>``: the file, with the hub's ``X-Repo-Commit`` and
  ``ETag`` headers.

Faults for tests: ``corrupt`` serves other bytes than the hub's record says (a truncated
upload); ``cut`` announces the full length but closes the connection early (a broken transfer).
"""

from __future__ import annotations

import hashlib
import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Dict, Optional

COMMIT = "0123456789abcdef0123456789abcdef01234567"
LFS_SUFFIXES = (".pth", ".safetensors", ".zip", ".tar", ".gz")


def _blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class HubServer:
    def __init__(self, repo: str, files: Dict[str, bytes],
                 corrupt: Optional[Dict[str, bytes]] = None,
                 cut: Optional[Dict[str, int]] = None):
        self.repo, self.files = repo, files
        self.corrupt, self.cut = corrupt or {}, cut or {}
        self.requests = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_HEAD(self):
                server._serve(self, body=False)

            def do_GET(self):
                server._serve(self, body=True)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

    def _sibling(self, name: str, data: bytes) -> dict:
        entry = {"rfilename": name, "size": len(data), "blobId": _blob_id(data)}
        if name.endswith(LFS_SUFFIXES):
            entry["lfs"] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data),
                            "pointerSize": 134}
        return entry

    def _serve(self, handler, body: bool) -> None:
        path = urllib.parse.urlsplit(handler.path).path
        self.requests.append((handler.command, path))
        info = f"/api/models/{self.repo}/revision/"
        resolve = f"/{self.repo}/resolve/"
        if path.startswith(info):
            payload = json.dumps({
                "id": self.repo, "modelId": self.repo, "sha": COMMIT, "private": False,
                "siblings": [self._sibling(n, d) for n, d in sorted(self.files.items())],
            }).encode()
            self._send(handler, 200, payload, {"Content-Type": "application/json"}, body)
        elif path.startswith(resolve):
            name = urllib.parse.unquote(path[len(resolve):].split("/", 1)[1])
            if name not in self.files:
                self._send(handler, 404, b"Entry not found", {"X-Error-Code": "EntryNotFound"},
                           body)
                return
            data = self.corrupt.get(name, self.files[name])
            sibling = self._sibling(name, self.files[name])
            etag = sibling["lfs"]["sha256"] if "lfs" in sibling else sibling["blobId"]
            headers = {"X-Repo-Commit": COMMIT, "ETag": f'"{etag}"',
                       "Content-Type": "application/octet-stream"}
            if body and name in self.cut:
                handler.send_response(200)
                for key, value in headers.items():
                    handler.send_header(key, value)
                handler.send_header("Content-Length", str(len(data)))
                handler.end_headers()
                handler.wfile.write(data[: self.cut[name]])
                handler.wfile.flush()
                handler.close_connection = True
                return
            self._send(handler, 200, data, headers, body)
        else:
            self._send(handler, 404, b"not found", {}, body)

    @staticmethod
    def _send(handler, status: int, data: bytes, headers: dict, body: bool) -> None:
        handler.send_response(status)
        for key, value in headers.items():
            handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        if body:
            handler.wfile.write(data)
