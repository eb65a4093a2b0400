/**
 * Where each service listens by default and how clients find it — the same rule as the
 * Python SDK and CLI (`episodic.endpoints`): `EPISODIC_<SERVICE>_ADDRESS` when set, else
 * `127.0.0.1:<EPISODIC_<SERVICE>_PORT>`, else `127.0.0.1:<the default port>`.
 */

/** The four services, in the order `episodic up` starts them. */
export const SERVICES = ["scheduler", "ingest", "summariser", "recall"] as const;
export type ServiceName = (typeof SERVICES)[number];

export const DEFAULT_PORTS: Readonly<Record<ServiceName, number>> = Object.freeze({
  ingest: 50051,
  scheduler: 50052,
  summariser: 50053,
  recall: 50054,
});

export type Environment = Readonly<Record<string, string | undefined>>;

function checkService(service: string): asserts service is ServiceName {
  if (!(service in DEFAULT_PORTS)) {
    throw new RangeError(`unknown service '${service}'; use one of ${SERVICES.join(", ")}`);
  }
}

/** `address` when given, else `127.0.0.1:<port or the default port>`. */
export function resolveAddress(
  service: ServiceName,
  address?: string | null,
  port?: number | null,
): string {
  checkService(service);
  if (address) return address;
  return `127.0.0.1:${port ? port : DEFAULT_PORTS[service]}`;
}

/** The address of `service` from the `EPISODIC_*` environment variables. */
export function addressFromEnv(service: ServiceName, env: Environment = process.env): string {
  checkService(service);
  const prefix = `EPISODIC_${service.toUpperCase()}`;
  const rawPort = (env[`${prefix}_PORT`] ?? "").trim();
  let port: number | null = null;
  if (rawPort) {
    if (!/^[+-]?\d+$/.test(rawPort)) {
      throw new RangeError(`${prefix}_PORT='${rawPort}' is not a port number`);
    }
    port = Number.parseInt(rawPort, 10);
  }
  const address = (env[`${prefix}_ADDRESS`] ?? "").trim();
  return resolveAddress(service, address || null, port);
}
