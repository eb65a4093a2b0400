/**
 * A tiny gRPC server over plaintext HTTP/2 (node:http2 only), for unit tests that need no
 * real services: it answers each call from a script, records what it received, and encodes
 * errors as the real services do — grpc-status, grpc-message and a google.rpc.Status with
 * an ErrorInfo (and, for a rate limit, a RetryInfo) in grpc-status-details-bin (built with
 * the generated schemas).
 */

import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";

import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import type { DescMessage, MessageInitShape, MessageShape } from "@bufbuild/protobuf";
import { anyPack } from "@bufbuild/protobuf/wkt";
import type { Any } from "@bufbuild/protobuf/wkt";

import { ErrorInfoSchema, RetryInfoSchema } from "../../src/gen/google/rpc/error_details_pb.js";
import { StatusSchema } from "../../src/gen/google/rpc/status_pb.js";

export interface ReceivedCall {
  path: string;
  headers: http2.IncomingHttpHeaders;
  body: Uint8Array; // the request message, unframed
}

export type Reply =
  | { ok: Uint8Array }
  | {
      code: number;
      message?: string;
      reason?: string;
      domain?: string;
      metadata?: Record<string, string>;
      /** Adds a google.rpc.RetryInfo asking the caller to wait this long (ms). */
      retryDelayMs?: number;
    }
  | { hang: true }
  | { reset: number }; // an HTTP/2 RST_STREAM with this error code instead of an answer

export type Handler = (call: ReceivedCall, attempt: number) => Reply | Promise<Reply>;

export function ok<Desc extends DescMessage>(schema: Desc, init?: MessageInitShape<Desc>): Reply {
  return { ok: toBinary(schema, create(schema, init)) };
}

export function decode<Desc extends DescMessage>(schema: Desc, call: ReceivedCall): MessageShape<Desc> {
  return fromBinary(schema, call.body);
}

function frame(message: Uint8Array): Buffer {
  const out = Buffer.alloc(5 + message.length);
  out.writeUInt32BE(message.length, 1);
  Buffer.from(message).copy(out, 5);
  return out;
}

function unframe(data: Buffer): Uint8Array {
  if (data.length < 5) return new Uint8Array();
  const length = data.readUInt32BE(1);
  return new Uint8Array(data.subarray(5, 5 + length));
}

export class FakeServer {
  readonly calls: ReceivedCall[] = [];
  private readonly handlers = new Map<string, Handler>();
  private readonly attempts = new Map<string, number>();
  private server: http2.Http2Server | undefined;
  private readonly sessions = new Set<http2.ServerHttp2Session>();

  /** `method` is the full path, e.g. "/episodic.v1.IngestService/GetThread". */
  on(method: string, handler: Handler): this {
    this.handlers.set(method, handler);
    return this;
  }

  callsTo(method: string): ReceivedCall[] {
    return this.calls.filter((c) => c.path === method);
  }

  async start(): Promise<string> {
    const server = http2.createServer();
    server.on("session", (s) => {
      this.sessions.add(s);
      s.on("close", () => this.sessions.delete(s));
    });
    server.on("stream", (stream, headers) => {
      const chunks: Buffer[] = [];
      stream.on("data", (c: Buffer) => chunks.push(c));
      stream.on("error", () => undefined);
      stream.on("end", () => {
        void this.answer(stream, headers, Buffer.concat(chunks));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    this.server = server;
    return `127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  private async answer(
    stream: http2.ServerHttp2Stream,
    headers: http2.IncomingHttpHeaders,
    body: Buffer,
  ): Promise<void> {
    const path = String(headers[":path"]);
    const call: ReceivedCall = { path, headers, body: unframe(body) };
    this.calls.push(call);
    const attempt = (this.attempts.get(path) ?? 0) + 1;
    this.attempts.set(path, attempt);
    const handler = this.handlers.get(path);
    const reply: Reply = handler
      ? await handler(call, attempt)
      : { code: 12, message: `no handler for ${path}` };
    if (stream.destroyed || stream.closed) return;
    if ("hang" in reply) return; // never answer: the client's deadline must end it
    if ("reset" in reply) {
      stream.close(reply.reset);
      return;
    }
    if ("ok" in reply) {
      stream.respond({ ":status": 200, "content-type": "application/grpc+proto" }, { waitForTrailers: true });
      stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
      stream.end(frame(reply.ok));
      return;
    }
    const trailers: http2.OutgoingHttpHeaders = {
      ":status": 200,
      "content-type": "application/grpc+proto",
      "grpc-status": String(reply.code),
      "grpc-message": encodeURIComponent(reply.message ?? ""),
    };
    if (reply.reason !== undefined || reply.retryDelayMs !== undefined) {
      const details: Any[] = [];
      if (reply.reason !== undefined) {
        details.push(
          anyPack(
            ErrorInfoSchema,
            create(ErrorInfoSchema, {
              reason: reply.reason,
              domain: reply.domain ?? "episodic.dev",
              metadata: reply.metadata ?? {},
            }),
          ),
        );
      }
      if (reply.retryDelayMs !== undefined) {
        const ms = reply.retryDelayMs;
        details.push(
          anyPack(
            RetryInfoSchema,
            create(RetryInfoSchema, {
              retryDelay: { seconds: BigInt(Math.floor(ms / 1000)), nanos: Math.round((ms % 1000) * 1e6) },
            }),
          ),
        );
      }
      const status = create(StatusSchema, { code: reply.code, message: reply.message ?? "", details });
      trailers["grpc-status-details-bin"] = Buffer.from(toBinary(StatusSchema, status))
        .toString("base64")
        .replace(/=+$/, "");
    }
    stream.respond(trailers, { endStream: true }); // trailers-only, as grpcio sends errors
  }

  async stop(): Promise<void> {
    for (const s of this.sessions) s.destroy();
    const server = this.server;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
