#!/usr/bin/env python3
"""A TLS push receiver for test-serve-http push-https (issue 31): serves HTTPS on
127.0.0.1:PORT with CERT and KEY, requires a client certificate signed by CLIENT_CA, and
keeps each POST's head and body in DIR as <pid>-<n>.head / .body (the head written last),
answering 200, as the C receiver of tests/test-serve-http.c does.
usage: test-push-tls-server.py PORT DIR CERT KEY CLIENT_CA"""
import http.server
import os
import ssl
import sys

port, out, cert, key, client_ca = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
count = [0]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        n = count[0]
        count[0] += 1
        base = os.path.join(out, "%d-%04d" % (os.getpid(), n))
        with open(base + ".body", "wb") as f:
            f.write(body)
        head = self.requestline + "\r\n" + "".join("%s: %s\r\n" % kv for kv in self.headers.items()) + "\r\n"
        with open(base + ".head.tmp", "w") as f:
            f.write(head)
        os.rename(base + ".head.tmp", base + ".head")
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.send_header("Connection", "close")
        self.end_headers()

    def log_message(self, fmt, *args):
        sys.stderr.write("tls receiver: " + fmt % args + "\n")


ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
ctx.load_verify_locations(client_ca)
ctx.verify_mode = ssl.CERT_REQUIRED
srv = http.server.HTTPServer(("127.0.0.1", port), Handler)
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
srv.serve_forever()
