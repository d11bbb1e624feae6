#!/usr/bin/python3
"""orders-api in Python: the same multi-tenant HTTP service as
examples/orders-api (Go), written with nothing of noisysim's, to show that
noisysim's gate sees any service through HTTP and pg_stat_activity alone
(scenario: examples/orders-api-python/scenario.yaml).

Python 3 standard library and psycopg2 (Debian: apt-get install
python3-psycopg2). Routes, tenant from the path:

    GET /healthz                              ready check (after both pools connected)
    GET /tenants/{tenant}/orders?customer=c7  a page of a customer's recent orders (interactive)
    GET /tenants/{tenant}/orders/{id}         one order (interactive)
    GET /tenants/{tenant}/report              a year of orders aggregated by month (heavy)

The contract noisysim's gate checks, kept as the Go service keeps it:

  * DSNs of the interactive and heavy roles from the environment
    (ORDERS_API_INTERACTIVE_DSN, ORDERS_API_HEAVY_DSN): libpq URLs.
  * A pool per class (interactive 12 connections, heavy 2), and a
    per-tenant limiter per class (interactive: 8 at once per tenant, 50
    waiting at most 3 s; heavy: 1 at once, none waiting). A tenant over
    its limit gets 429 with Retry-After in whole seconds, rounded up and
    never 0; a pool with no connection free within its timeout gives 503.
  * Every borrowed connection is tagged application_name = t:<tenant>
    with a statement of its own (autocommit: outside any transaction of
    the tenant's, so no rollback undoes it) before the tenant's query, and
    reset to the pool's own name before it goes back.

ORDERS_API_BYPASS_REPORT=1 (or --bypass-report) is the regression the gate
exists to catch: the report route takes a connection straight from a
psycopg2 pool of its own, without limiter, heavy pool or tag.

    ORDERS_API_INTERACTIVE_DSN=... ORDERS_API_HEAVY_DSN=... \\
        python3 orders_api.py --addr 127.0.0.1:8080
"""

import argparse
import collections
import json
import math
import os
import re
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import psycopg2
import psycopg2.pool

PAGE_SQL = """SELECT id, created_at, amount, status FROM orders WHERE tenant_id = %s AND customer = %s
    ORDER BY created_at DESC LIMIT 20"""
LOOKUP_SQL = "SELECT id, created_at, amount, status FROM orders WHERE tenant_id = %s AND id = %s"
REPORT_SQL = """SELECT date_trunc('month', created_at) AS month, status, count(*), sum(amount), avg(amount)
    FROM orders WHERE tenant_id = %s AND created_at >= now() - interval '1 year' GROUP BY 1, 2 ORDER BY 1, 2"""

TAG_SQL = "SELECT set_config('application_name', %s, false)"
RESET_SQL = "RESET application_name"


class Limited(Exception):
    """A limiter rejection: reason queue_full or wait_exceeded, and the
    seconds after which a retry may succeed."""

    def __init__(self, reason, retry_after):
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


def retry_after_header(seconds):
    """Retry-After in whole seconds (RFC 9110 10.2.3): rounded up, at least 1."""
    return str(max(1, math.ceil(seconds)))


class Limiter:
    """Per-tenant concurrency limit: at most max_per_tenant calls of a
    tenant at once, up to max_queue more wait in the tenant's FIFO queue
    for at most max_wait seconds. A freed slot passes straight to the
    tenant's next waiter, so a noisy tenant queues behind itself."""

    class _Waiter:
        __slots__ = ("deadline", "granted", "event")

        def __init__(self, deadline):
            self.deadline = deadline
            self.granted = False
            self.event = threading.Event()

    def __init__(self, max_per_tenant, max_queue, max_wait, retry_after=1.0):
        self.max_per_tenant = max_per_tenant
        self.max_queue = max_queue
        self.max_wait = max_wait
        self.retry_after = retry_after
        self.lock = threading.Lock()
        self.in_flight = collections.Counter()
        self.queues = collections.defaultdict(collections.deque)

    def acquire(self, tenant):
        with self.lock:
            q = self.queues[tenant]
            if self.in_flight[tenant] < self.max_per_tenant and not q:
                self.in_flight[tenant] += 1
                return
            if len(q) >= self.max_queue:
                # The head waiter's remaining wait, else the fallback.
                hint = max(q[0].deadline - time.monotonic(), 0) if q else self.retry_after
                raise Limited("queue_full", hint)
            w = self._Waiter(time.monotonic() + self.max_wait)
            q.append(w)
        w.event.wait(self.max_wait)
        with self.lock:
            if w.granted:
                return
            q.remove(w)
        raise Limited("wait_exceeded", self.max_wait)

    def release(self, tenant):
        with self.lock:
            q = self.queues[tenant]
            if q:
                w = q.popleft()  # the slot passes on: in_flight unchanged
                w.granted = True
                w.event.set()
                return
            self.in_flight[tenant] -= 1


class PoolTimeout(Exception):
    """No connection of the pool came free within its acquire timeout."""


class Pool:
    """A fixed-size pool of autocommit connections of one role."""

    def __init__(self, name, dsn, size, acquire_timeout):
        self.name = name
        self.dsn = dsn
        self.acquire_timeout = acquire_timeout
        self.slots = threading.BoundedSemaphore(size)
        self.lock = threading.Lock()
        self.idle = [self._connect()]  # fail at start, not on the first request

    def _connect(self):
        # Its own name while idle: the tag is t:<tenant> only while borrowed.
        conn = psycopg2.connect(self.dsn, application_name="orders-api-py-" + self.name)
        conn.autocommit = True
        return conn

    def acquire(self):
        if not self.slots.acquire(timeout=self.acquire_timeout):
            raise PoolTimeout(self.name)
        with self.lock:
            conn = self.idle.pop() if self.idle else None
        if conn is None:
            try:
                conn = self._connect()
            except BaseException:
                self.slots.release()
                raise
        return conn

    def release(self, conn, broken=False):
        if broken or conn.closed:
            conn.close()
        else:
            with self.lock:
                self.idle.append(conn)
        self.slots.release()

    def close(self):
        with self.lock:
            for conn in self.idle:
                conn.close()
            self.idle = []


class Stack:
    """The one path to the database: limiter, pool, tag, query, reset."""

    def __init__(self, classes):
        self.classes = classes  # name -> (Limiter, Pool)

    def query(self, cls, tenant, sql, args):
        limiter, pool = self.classes[cls]
        limiter.acquire(tenant)
        try:
            conn = pool.acquire()
            broken = True
            try:
                with conn.cursor() as cur:
                    cur.execute(TAG_SQL, ("t:" + tenant,))
                    try:
                        cur.execute(sql, args)
                        rows = len(cur.fetchall())
                    finally:
                        cur.execute(RESET_SQL)
                broken = False
                return rows
            except psycopg2.Error:
                # A failed statement leaves an autocommit session usable;
                # a lost connection does not.
                broken = conn.closed != 0
                raise
            finally:
                pool.release(conn, broken)
        finally:
            limiter.release(tenant)


class API:
    def __init__(self, stack, direct, log):
        self.stack = stack
        self.direct = direct  # the bypass's pool; None as built
        self.log = log

    def report(self, tenant):
        if self.direct is None:
            return self.stack.query("heavy", tenant, REPORT_SQL, (int(tenant),))
        # The regression: a connection straight from a pool of its own,
        # no limiter, no tag, sized "to keep up".
        conn = self.direct.getconn()
        try:
            with conn.cursor() as cur:
                cur.execute(REPORT_SQL, (int(tenant),))
                return len(cur.fetchall())
        finally:
            self.direct.putconn(conn)


ROUTES = [
    (re.compile(r"^/tenants/(?P<tenant>[^/]+)/orders$"), "page"),
    (re.compile(r"^/tenants/(?P<tenant>[^/]+)/orders/(?P<id>[^/]+)$"), "lookup"),
    (re.compile(r"^/tenants/(?P<tenant>[^/]+)/report$"), "report"),
]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as noisysim's client expects
    # Headers and body go out in two writes: without TCP_NODELAY the body
    # waits for the client's delayed ACK (40 ms on Linux) on every answer.
    disable_nagle_algorithm = True
    api = None

    def log_message(self, fmt, *args):  # no line per request
        pass

    def send(self, status, body, headers=()):
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json" if status == 200 else "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        url = urlsplit(self.path)
        if url.path == "/healthz":
            return self.send(200, "ok\n")
        for pattern, route in ROUTES:
            m = pattern.match(url.path)
            if m:
                break
        else:
            return self.send(404, "not found\n")
        tenant = m.group("tenant")
        if not tenant.isdigit():
            return self.send(400, "tenant must be a number\n")
        try:
            if route == "page":
                customer = parse_qs(url.query).get("customer", ["c1"])[0]
                rows = self.api.stack.query("interactive", tenant, PAGE_SQL, (int(tenant), customer))
            elif route == "lookup":
                if not m.group("id").isdigit():
                    return self.send(400, "id must be a number\n")
                rows = self.api.stack.query("interactive", tenant, LOOKUP_SQL, (int(tenant), int(m.group("id"))))
            else:
                rows = self.api.report(tenant)
        except Limited as e:
            return self.send(429, "Too Many Requests\n", [("Retry-After", retry_after_header(e.retry_after))])
        except (PoolTimeout, psycopg2.pool.PoolError):
            return self.send(503, "busy\n", [("Retry-After", "1")])
        except psycopg2.Error as e:
            self.api.log("query: %s" % str(e).strip())
            return self.send(500, "internal error\n")
        self.send(200, json.dumps({"rows": rows}) + "\n")


def main(argv):
    p = argparse.ArgumentParser(description="orders-api in Python, for noisysim's gate")
    p.add_argument("--addr", default="127.0.0.1:8080", help="listen address host:port")
    p.add_argument("--interactive-dsn", default=os.environ.get("ORDERS_API_INTERACTIVE_DSN", ""))
    p.add_argument("--heavy-dsn", default=os.environ.get("ORDERS_API_HEAVY_DSN", ""))
    p.add_argument("--bypass-report", action="store_true", default=os.environ.get("ORDERS_API_BYPASS_REPORT") == "1",
                   help="send the report route around the stack (the regression)")
    args = p.parse_args(argv)

    def log(msg):
        print("orders-api-python: " + msg, file=sys.stderr, flush=True)

    if not args.interactive_dsn or not args.heavy_dsn:
        log("give --interactive-dsn and --heavy-dsn (or ORDERS_API_INTERACTIVE_DSN, ORDERS_API_HEAVY_DSN)")
        return 1
    host, _, port = args.addr.rpartition(":")
    try:
        stack = Stack({
            "interactive": (Limiter(8, 50, 3.0), Pool("interactive", args.interactive_dsn, 12, 3.0)),
            "heavy": (Limiter(1, 0, 0.0), Pool("heavy", args.heavy_dsn, 2, 5.0)),
        })
        direct = None
        if args.bypass_report:
            direct = psycopg2.pool.ThreadedConnectionPool(1, 16, args.heavy_dsn)
            log("report route bypasses the stack")
    except psycopg2.Error as e:
        log("connect: %s" % str(e).strip())
        return 1

    Handler.api = API(stack, direct, log)
    server = ThreadingHTTPServer((host, int(port)), Handler)
    server.daemon_threads = True

    def stop(signum, frame):
        threading.Thread(target=server.shutdown).start()  # shutdown waits for serve_forever

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    log("listening on %s" % args.addr)
    server.serve_forever()
    server.server_close()
    for _, pool in stack.classes.values():
        pool.close()
    if direct is not None:
        direct.closeall()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
