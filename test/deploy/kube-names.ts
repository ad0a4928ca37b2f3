// How Kubernetes names a Deployment's ReplicaSets and pods, for tests that need realistic series.
// The Deployment controller names a ReplicaSet `<deployment>-<pod-template-hash>`, the hash being
// the FNV-32a hash of the pod template in decimal with each digit safe-encoded
// (k8s.io/apimachinery/pkg/util/rand.SafeEncodeString). The ReplicaSet controller asks for pods
// with generateName `<replicaset>-`, and the API server's names.SimpleNameGenerator cuts that
// prefix to 58 characters (63 less the 5 random ones) before it adds 5 random characters.

/** The alphabet of rand.String and rand.SafeEncodeString: no vowels, no 0/1/3, so no words. */
export const ALPHANUMS = 'bcdfghjklmnpqrstvwxz2456789';
const MAX_GENERATED_NAME_LENGTH = 63 - 5;

const podTemplateHash = (hash32: number): string => String(hash32).replace(/\d/g, (digit) => ALPHANUMS.charAt(digit.charCodeAt(0) % ALPHANUMS.length));

/** The 32-bit hash a pod-template-hash encodes, or undefined when no 32-bit hash encodes to it. */
export function decodePodTemplateHash(hash: string): number | undefined {
  const decimal = hash.replace(/./g, (char) => String('0123456789'.split('').findIndex((digit) => podTemplateHash(Number(digit)) === char)));
  if (!/^\d+$/.test(decimal)) return undefined;
  const value = Number(decimal);
  return value <= 0xffffffff && podTemplateHash(value) === hash ? value : undefined;
}

/** The name the API server gives a pod that a ReplicaSet creates, with `random` as its 5 random characters. */
export const podName = (replicaSet: string, random: string): string => `${replicaSet}-`.slice(0, MAX_GENERATED_NAME_LENGTH) + random;
