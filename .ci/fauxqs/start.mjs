// Starts the fauxqs SQS emulator for txmq's tests, bound to loopback only.
//
// Usage: node start.mjs [port]      (or FAUXQS_PORT=port node start.mjs; default 4566)
//
// fauxqs 1.9.2 calls app.listen({ host: "0.0.0.0" }) unconditionally (its `host`
// option only names the host in queue URLs), so net.Server.prototype.listen is
// patched to turn a wildcard/missing host into 127.0.0.1. The patch must be
// installed BEFORE fauxqs (and fastify) is imported.
import net from "node:net";

const LOOPBACK = "127.0.0.1";
const WILDCARD = new Set([undefined, null, "", "0.0.0.0", "::", "[::]"]);
const origListen = net.Server.prototype.listen;
net.Server.prototype.listen = function patchedListen(...args) {
  const first = args[0];
  if (first !== null && typeof first === "object" && !Array.isArray(first)) {
    // listen(options[, cb]); leave unix sockets / handles alone.
    if (first.path === undefined && first.handle === undefined && first._handle === undefined && first.fd === undefined && WILDCARD.has(first.host)) {
      args[0] = { ...first, host: LOOPBACK };
    }
  } else if (typeof first === "number" || (typeof first === "string" && /^\d+$/.test(first))) {
    // listen(port[, host][, backlog][, cb])
    if (typeof args[1] === "function" || args.length === 1) {
      args.splice(1, 0, LOOPBACK);
    } else if (WILDCARD.has(args[1])) {
      args[1] = LOOPBACK;
    } else if (typeof args[1] === "number") {
      // listen(port, backlog, cb)
      args.splice(1, 0, LOOPBACK);
    }
  }
  return origListen.apply(this, args);
};

const raw = process.argv[2] ?? process.env.FAUXQS_PORT ?? "4566";
const port = Number.parseInt(raw, 10);
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  console.error(`fauxqs start: bad port ${JSON.stringify(raw)}`);
  process.exit(2);
}

const { startFauxqs } = await import("fauxqs");
// No `host`: queue URLs then name the host the request came to (127.0.0.1:PORT).
const server = await startFauxqs({ port, logger: false });
console.log(`fauxqs listening on http://${LOOPBACK}:${server.port} (pid ${process.pid})`);

let stopping = false;
async function shutdown(signal) {
  if (stopping) return;
  stopping = true;
  try {
    await server.stop();
  } catch (err) {
    console.error(`fauxqs stop after ${signal}:`, err);
  }
  process.exit(0);
}
process.on("SIGTERM", () => shutdown("SIGTERM"));
process.on("SIGINT", () => shutdown("SIGINT"));
