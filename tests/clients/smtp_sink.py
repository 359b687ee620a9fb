"""A loopback SMTP sink for the alert-delivery tests (aiosmtpd).

Listens on 127.0.0.1 (--port 0 picks a free port), prints the port on stdout, and writes each
accepted message to DIR/<n>.eml with DIR/<n>.json beside it: the envelope (mail_from,
rcpt_tos) and the message as Python's email package reads it (subject, from, to, text).
Options: STARTTLS required (--starttls CERT KEY) or implicit TLS (--tls CERT KEY); AUTH
LOGIN/PLAIN required (--user U --password P), over plain text only with --auth-without-tls;
recipients answered with an error reply (--reject ADDRESS --reject-reply "550 ...").
Exits when stdin closes or on SIGTERM.
"""

import argparse
import email
import email.policy
import json
import logging
import signal
import ssl
import sys
import warnings
from pathlib import Path

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword


class Sink:
    def __init__(self, directory, reject, reject_reply):
        self.directory = Path(directory)
        self.reject = set(reject)
        self.reject_reply = reject_reply
        self.count = 0

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if address in self.reject:
            return self.reject_reply
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        self.count += 1
        raw = envelope.original_content or envelope.content
        parsed = email.message_from_bytes(raw, policy=email.policy.default)
        body = parsed.get_body(preferencelist=("plain",))
        sidecar = {
            "mail_from": envelope.mail_from,
            "rcpt_tos": envelope.rcpt_tos,
            "subject": parsed["subject"],
            "from": parsed["from"],
            "to": parsed["to"],
            "text": body.get_content() if body is not None else None,
        }
        stem = self.directory / str(self.count)
        stem.with_suffix(".json").write_text(json.dumps(sidecar))
        stem.with_suffix(".eml").write_bytes(raw)
        return "250 OK"


class Authenticator:
    def __init__(self, user, password):
        self.user = user.encode()
        self.password = password.encode()

    def __call__(self, server, session, envelope, mechanism, auth_data):
        ok = (
            isinstance(auth_data, LoginPassword)
            and auth_data.login == self.user
            and auth_data.password == self.password
        )
        # handled=False: aiosmtpd itself answers 535 to a failure.
        return AuthResult(success=ok, handled=False)


class SinkController(Controller):
    def _trigger_server(self):
        # With --port 0 the OS chose the port: read it before the readiness probe uses it.
        if self.port == 0:
            self.port = self.server.sockets[0].getsockname()[1]
        super()._trigger_server()


def tls_context(cert, key):
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return context


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--dir", required=True)
    parser.add_argument("--starttls", nargs=2, metavar=("CERT", "KEY"))
    parser.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"))
    parser.add_argument("--user")
    parser.add_argument("--password")
    parser.add_argument("--auth-without-tls", action="store_true")
    parser.add_argument("--reject", action="append", default=[])
    parser.add_argument("--reject-reply", default="550 5.1.1 recipient rejected")
    args = parser.parse_args()
    # --auth-without-tls is asked for on purpose: keep aiosmtpd's warnings about it quiet.
    warnings.simplefilter("ignore")
    logging.getLogger("mail.log").setLevel(logging.ERROR)

    kwargs = {}
    if args.starttls:
        kwargs.update(tls_context=tls_context(*args.starttls), require_starttls=True)
    if args.tls:
        kwargs.update(ssl_context=tls_context(*args.tls))
    if args.user is not None:
        kwargs.update(
            authenticator=Authenticator(args.user, args.password or ""),
            auth_required=True,
            # aiosmtpd 1.4.6 counts only STARTTLS as TLS: under implicit TLS it would hide AUTH.
            auth_require_tls=not (args.auth_without_tls or args.tls),
        )

    handler = Sink(args.dir, args.reject, args.reject_reply)
    controller = SinkController(handler, hostname="127.0.0.1", port=args.port, **kwargs)
    controller.start()
    print(controller.port, flush=True)

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        sys.stdin.read()  # until the test closes stdin (or dies)
    finally:
        controller.stop()


if __name__ == "__main__":
    main()
