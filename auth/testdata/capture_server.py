"""Records every request (method, raw request-target, headers, time) as JSON
lines on stdout and answers just enough S3 for clients to go on."""
import json, sys, time
from http.server import BaseHTTPRequestHandler, HTTPServer

LIST = b'<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>bkt</Name><Prefix></Prefix><KeyCount>0</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated></ListBucketResult>'
LOC = b'<?xml version="1.0" encoding="UTF-8"?><LocationConstraint xmlns="http://s3.amazonaws.com/doc/2006-03-01/"/>'

class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def rec(self):
        hs = {}
        for k, v in self.headers.items():
            hs.setdefault(k, []).append(v)
        print(json.dumps({"tag": self.server.tag, "method": self.command, "target": self.path,
                          "headers": hs, "now": int(time.time())}), flush=True)
    def reply(self, code, body, ctype="application/xml", extra=None):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("ETag", '"5d41402abc4b2a76b9719d911017c592"')
        self.send_header("Last-Modified", "Mon, 01 Jan 2024 00:00:00 GMT")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
    def do_HEAD(self):
        self.rec()
        self.reply(200, b"hello", "application/octet-stream")
    def do_GET(self):
        self.rec()
        p, _, q = self.path.partition("?")
        if "location" in q:
            self.reply(200, LOC)
        elif p.rstrip("/").count("/") <= 1:
            self.reply(200, LIST)
        elif self.headers.get("Range"):
            self.reply(206, b"hello", "application/octet-stream", {"Content-Range": "bytes 0-4/5"})
        else:
            self.reply(200, b"hello", "application/octet-stream")
    def log_message(self, *a):
        pass

srv = HTTPServer(("127.0.0.1", 9999), H)
srv.tag = sys.argv[1] if len(sys.argv) > 1 else ""
srv.serve_forever()
