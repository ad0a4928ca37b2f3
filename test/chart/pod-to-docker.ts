// A stand-in for a Kubernetes node (scripts/ci/README.md): translates a rendered pod spec into `docker run`
// flags as the kubelet and container runtime would, for the settings this chart uses. What it cannot
// translate faithfully throws, so a new pod setting cannot be silently dropped from the test.
import { randomUUID } from 'node:crypto';
import { chmodSync, mkdirSync } from 'node:fs';
import { get } from 'node:http';
import { join } from 'node:path';
import type { IContainer, IPodSpec, IProbe, ISecretKeySelector } from 'kubernetes-models/v1';
import { byName, must } from './helm';

export interface PodIdentity {
  podName: string;
  namespace: string;
  nodeName: string;
}

/** What the kubelet takes from the node and from the API server to start the pod. */
export interface PodInputs {
  /** The directory under which each disk-backed emptyDir gets its own directory, as the kubelet makes one per pod. */
  emptyDirRoot: string;
  /** Host directories holding the files of the pod's ConfigMap and Secret volumes, by volume name, as the kubelet projects them. */
  sources?: Record<string, string>;
  /** The data of the Secrets the container's env refers to (`secretKeyRef`), by Secret name, then key. */
  secrets?: Record<string, Record<string, string>>;
}

export interface Translation {
  args: string[];
  /** The container's environment after the kubelet's $(VAR) expansion. */
  env: Map<string, string>;
}

const suffixes: Record<string, number> = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, k: 1e3, M: 1e6, G: 1e9 };

/** A Kubernetes quantity in bytes ("256Mi" -> 268435456). */
export function bytes(quantity: string | number): number {
  const match = /^(\d+)(Ki|Mi|Gi|k|M|G)?$/.exec(String(quantity));
  if (!match) throw new Error(`cannot translate quantity ${quantity}`);
  return Number(match[1]) * (match[2] === undefined ? 1 : (suffixes[match[2]] ?? 1));
}

/** CPU quantity in millicores ("100m" -> 100, "1" -> 1000). */
function millicores(quantity: string | number): number {
  const s = String(quantity);
  return s.endsWith('m') ? Number(s.slice(0, -1)) : Number(s) * 1000;
}

/** Kubelet semantics: $(VAR) expands to an earlier variable's value, $$ escapes, unknown stays. */
function expand(value: string, defined: Map<string, string>): string {
  return value.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)/g, (whole, name: string | undefined) => {
    if (name === undefined) return '$';
    return defined.get(name) ?? whole;
  });
}

function fieldValue(fieldPath: string, pod: PodIdentity, uid: string): string {
  const fields: Record<string, string> = {
    'metadata.name': pod.podName,
    'metadata.namespace': pod.namespace,
    'metadata.uid': uid,
    'spec.nodeName': pod.nodeName,
  };
  return must(fields[fieldPath], `a translation of fieldRef ${fieldPath}`);
}

/** A Secret key's value: a missing one fails, as the kubelet refuses to start the container (an optional one, left out, is not translated). */
function secretValue(variable: string, ref: ISecretKeySelector, secrets: PodInputs['secrets']): string {
  if (ref.optional) throw new Error(`cannot translate the optional secretKeyRef of ${variable}`);
  const name = must(ref.name, `the Secret name of ${variable}`);
  const value = secrets?.[name]?.[ref.key];
  if (value === undefined) throw new Error(`${variable}: Secret ${name} has no key ${ref.key} here (the kubelet would not start the container)`);
  return value;
}

const containerOf = (podSpec: IPodSpec, name: string): IContainer => must(podSpec.containers.find(byName(name)), `container ${name}`);

/** `docker run` flags for container `containerName` of `podSpec`; the caller adds the network, the name and the image. */
export function translatePod(podSpec: IPodSpec, containerName: string, pod: PodIdentity, inputs?: PodInputs): Translation {
  const container = containerOf(podSpec, containerName);
  if (podSpec.initContainers?.length) throw new Error('init containers are not translated');
  if (podSpec.hostNetwork || podSpec.hostPID || podSpec.hostIPC) throw new Error('host namespaces are not translated');
  if (container.envFrom?.length) throw new Error('envFrom is not translated');

  const podSc = podSpec.securityContext ?? {};
  const sc = container.securityContext ?? {};
  const args: string[] = ['--hostname', pod.podName];

  // fsGroup and supplementalGroups become supplementary groups of the process.
  const user = sc.runAsUser ?? podSc.runAsUser;
  const group = sc.runAsGroup ?? podSc.runAsGroup;
  if (user === undefined) throw new Error('runAsUser is not set: the test would run as the image user');
  if ((sc.runAsNonRoot ?? podSc.runAsNonRoot) && user === 0) throw new Error('runAsNonRoot with runAsUser 0: the kubelet refuses to start it');
  args.push('--user', group === undefined ? String(user) : `${user}:${group}`);
  for (const extra of [podSc.fsGroup, ...(podSc.supplementalGroups ?? [])]) {
    if (extra !== undefined) args.push('--group-add', String(extra));
  }

  // The chart adds no privileges (render.test.ts); RuntimeDefault seccomp is Docker's default profile.
  if (sc.privileged || sc.capabilities?.add?.length) throw new Error('privileged containers and added capabilities are not translated');
  if (sc.allowPrivilegeEscalation === false) args.push('--security-opt', 'no-new-privileges');
  for (const cap of sc.capabilities?.drop ?? []) args.push('--cap-drop', cap);
  const seccomp = (sc.seccompProfile ?? podSc.seccompProfile)?.type;
  if (seccomp !== 'RuntimeDefault') throw new Error(`cannot translate seccompProfile ${String(seccomp)}`);
  if (sc.readOnlyRootFilesystem) args.push('--read-only');

  // Volumes. A disk-backed emptyDir is a world-writable host directory (sizeLimit is enforced by eviction, not the mount);
  // a ConfigMap or Secret, the files the caller projects, read-only. (The chart renders no Memory emptyDir.)
  for (const mount of container.volumeMounts ?? []) {
    const volume = must(podSpec.volumes?.find(byName(mount.name)), `volume ${mount.name}`);
    if (mount.subPath !== undefined || mount.subPathExpr !== undefined) throw new Error(`cannot translate the subPath of mount ${mount.name}`);
    const readonly = mount.readOnly ? ',readonly' : '';
    if (volume.emptyDir && volume.emptyDir.medium === undefined) {
      if (inputs === undefined) throw new Error(`emptyDir ${mount.name}: translatePod needs a PodInputs.emptyDirRoot`);
      const dir = join(inputs.emptyDirRoot, mount.name);
      mkdirSync(dir, { recursive: true });
      chmodSync(dir, 0o777);
      args.push('--mount', `type=bind,source=${dir},destination=${mount.mountPath}${readonly}`);
    } else if (volume.configMap || volume.secret) {
      const source = must(inputs?.sources?.[mount.name], `the files of ConfigMap/Secret volume ${mount.name}`);
      args.push('--mount', `type=bind,source=${source},destination=${mount.mountPath},readonly`);
    } else {
      throw new Error(`cannot translate volume ${mount.name}`);
    }
  }

  // Resources: the memory limit is the cgroup limit; the CPU request becomes a CPU weight.
  const limits = container.resources?.limits ?? {};
  const requests = container.resources?.requests ?? {};
  if (limits.memory !== undefined) args.push('--memory', String(bytes(limits.memory)), '--memory-swap', String(bytes(limits.memory)));
  if (limits.cpu !== undefined) args.push('--cpus', String(millicores(limits.cpu) / 1000));
  if (requests.cpu !== undefined) args.push('--cpu-shares', String(Math.max(2, Math.round((millicores(requests.cpu) * 1024) / 1000))));

  const env = new Map<string, string>();
  const uid = randomUUID();
  for (const e of container.env ?? []) {
    let value: string;
    if (e.valueFrom?.fieldRef) value = fieldValue(e.valueFrom.fieldRef.fieldPath, pod, uid);
    else if (e.valueFrom?.secretKeyRef) value = secretValue(e.name, e.valueFrom.secretKeyRef, inputs?.secrets);
    else if (e.valueFrom) throw new Error(`cannot translate valueFrom of ${e.name}`);
    else value = expand(e.value ?? '', env);
    env.set(e.name, value);
  }
  for (const [name, value] of env) args.push('--env', `${name}=${value}`);

  if (container.workingDir !== undefined) args.push('--workdir', container.workingDir);
  const [entrypoint] = container.command ?? [];
  if (entrypoint !== undefined) args.push('--entrypoint', entrypoint);
  // Published on loopback only; the test probes these as the kubelet probes the pod IP.
  for (const p of container.ports ?? []) args.push('--publish', `127.0.0.1::${p.containerPort}`);
  if (podSpec.terminationGracePeriodSeconds !== undefined) args.push('--stop-timeout', String(podSpec.terminationGracePeriodSeconds));

  return { args, env };
}

/** What follows the image in `docker run`: the rest of `command`, then `args`. */
export function commandArgs(podSpec: IPodSpec, containerName: string): string[] {
  const container = containerOf(podSpec, containerName);
  return [...(container.command?.slice(1) ?? []), ...(container.args ?? [])];
}

/**
 * One HTTP probe as the kubelet sends it: GET with its User-Agent on a new connection (the kubelet
 * disables keep-alive), the probe's timeout, redirects not followed, success on 200-399.
 * `portUrls`: the base URL of each named container port, as the host reaches it.
 */
export function probeOnce(probe: IProbe, portUrls: Readonly<Record<string, string>>): Promise<{ ok: boolean; detail: string }> {
  const { path = '/', port } = must(probe.httpGet, 'httpGet probe');
  const url = `${must(portUrls[String(port)], `the probe's port ${String(port)}`)}${path}`;
  return new Promise((resolve) => {
    const req = get(url, { agent: false, headers: { 'User-Agent': 'kube-probe/1.34', Accept: '*/*' }, timeout: (probe.timeoutSeconds ?? 1) * 1000 }, (res) => {
      res.resume();
      res.on('end', () => resolve({ ok: (res.statusCode ?? 0) >= 200 && (res.statusCode ?? 0) < 400, detail: `HTTP ${res.statusCode}` }));
    });
    req.on('timeout', () => req.destroy(new Error(`timed out after ${probe.timeoutSeconds ?? 1} s`)));
    req.on('error', (err) => resolve({ ok: false, detail: String(err) }));
  });
}

/** Runs `probe` as the kubelet does: the seconds until successThreshold successes in a row, or throws at failureThreshold failures. */
export async function probeUntil(name: string, probe: IProbe, portUrls: Readonly<Record<string, string>>): Promise<number> {
  const started = Date.now();
  let failures = 0;
  let successes = 0;
  for (;;) {
    const result = await probeOnce(probe, portUrls);
    if (result.ok) {
      failures = 0;
      if (++successes >= (probe.successThreshold ?? 1)) return (Date.now() - started) / 1000;
    } else {
      successes = 0;
      if (++failures >= (probe.failureThreshold ?? 3)) {
        throw new Error(`${name} failed ${failures} times in a row (last: ${result.detail})`);
      }
    }
    await new Promise((resolve) => setTimeout(resolve, (probe.periodSeconds ?? 10) * 1000));
  }
}
