import type { IncomingMessage } from 'node:http';
import { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Context, type Span } from '@opentelemetry/api';
import { serviceInfo } from './service-info';
import { telemetryState } from './telemetry-state';

/**
 * The HTTP server span of a request, made here instead of by @opentelemetry/instrumentation-http.
 * That instrumentation binds every request and response EventEmitter to the request's context,
 * parses the URL again and wraps res.end; measured, it was a third of the CPU of a traced request
 * (bench/results). This creates the same span with the stable HTTP semantic conventions
 * (https://opentelemetry.io/docs/specs/semconv/http/http-spans/): named `{method} {route}`,
 * kind SERVER, continuing an incoming W3C traceparent, status ERROR and error.type on 5xx.
 */

const tracer = trace.getTracer(serviceInfo().name, serviceInfo().version);

/** Methods semantic conventions know; any other is reported as _OTHER with the original beside it. */
const KNOWN_METHODS = new Set(['CONNECT', 'DELETE', 'GET', 'HEAD', 'OPTIONS', 'PATCH', 'POST', 'PUT', 'TRACE']);

export interface ServerSpan {
  readonly span: Span;
  /** The context to run the request in: the span is active in it (logs and child spans find it). */
  readonly context: Context;
}

/**
 * Starts the server span of `req`, or returns undefined when tracing is off (OTEL_SDK_DISABLED, or
 * the service built without the telemetry preload, as in unit tests): then nothing is paid per request.
 */
export function startServerSpan(req: IncomingMessage, path: string): ServerSpan | undefined {
  if (!telemetryState.tracingEnabled) return undefined;
  const parent = propagation.extract(ROOT_CONTEXT, req.headers);
  const method = req.method ?? 'GET';
  const knownMethod = KNOWN_METHODS.has(method);
  const socket = req.socket;
  const span = tracer.startSpan(
    knownMethod ? method : 'HTTP',
    {
      kind: SpanKind.SERVER,
      // The required attributes and the recommended ones an on-call engineer uses; each attribute
      // is serialised into every exported span, so network.peer.* (equal to client.address without
      // a proxy) and the default protocol version are left out.
      attributes: {
        'http.request.method': knownMethod ? method : '_OTHER',
        'url.scheme': 'http',
        'url.path': path,
        'server.port': socket.localPort,
        'client.address': socket.remoteAddress,
        'user_agent.original': req.headers['user-agent'],
      },
    },
    parent,
  );
  if (!knownMethod) span.setAttribute('http.request.method_original', method);
  // Semantic conventions ask for the protocol version only when it is not the default 1.1.
  if (req.httpVersion !== '1.1') span.setAttribute('network.protocol.version', req.httpVersion);
  return { span, context: trace.setSpan(parent, span) };
}

/** Ends the span with the answer: status code, the route that matched (it also names the span). */
export function endServerSpan(serverSpan: ServerSpan, method: string, status: number, route: string | undefined): void {
  const { span } = serverSpan;
  if (route !== undefined) {
    span.updateName(`${KNOWN_METHODS.has(method) ? method : 'HTTP'} ${route}`);
    span.setAttribute('http.route', route);
  }
  span.setAttribute('http.response.status_code', status);
  // Server spans are errors for 5xx only: a 4xx is the client's mistake, answered correctly.
  if (status >= 500) {
    span.setAttribute('error.type', String(status));
    span.setStatus({ code: SpanStatusCode.ERROR });
  }
  span.end();
}

/** Runs `fn` with the span active: log lines and `trace.getActiveSpan()` inside it find the span. */
export function withServerSpan<T>(serverSpan: ServerSpan, fn: () => T): T {
  return context.with(serverSpan.context, fn);
}
