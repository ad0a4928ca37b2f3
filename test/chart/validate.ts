// Validates rendered objects against the Kubernetes API schemas (kubernetes-models) and the Prometheus
// Operator and Gateway API CRD schemas, which do not reject unknown fields: the chart's strict
// values.schema.json and the policy tests (reading the exact field paths) cover those.
import { ConfigMap, Pod, Service, ServiceAccount } from 'kubernetes-models/v1';
import { Deployment } from 'kubernetes-models/apps/v1';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { Ingress, NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import { PodMonitor, Probe, PrometheusRule, ServiceMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1';
import { HTTPRoute } from '@kubernetes-models/gateway-api/gateway.networking.k8s.io/v1';

const MODELS = [ConfigMap, Pod, Service, ServiceAccount, Deployment, HorizontalPodAutoscaler, PodDisruptionBudget, Ingress, NetworkPolicy] as const;
const CRD_MODELS = [ServiceMonitor, PodMonitor, Probe, PrometheusRule, HTTPRoute] as const;
export type Kinds = { [M in (typeof MODELS)[number] | (typeof CRD_MODELS)[number] as M['kind']]: InstanceType<M> };

// Each model takes its own kind's type; the rendered object is checked by validate(), not by the compiler.
type Model = { apiVersion: string; kind: string; new (data: never): { validate(): void } };
const models = new Map(([...MODELS, ...CRD_MODELS] as Model[]).map((model) => [`${model.apiVersion}/${model.kind}`, model]));

/** Throws, naming the object and the failing field, unless the object is valid for its kind. */
export function validateObject(obj: { apiVersion?: string; kind?: string; metadata?: { name?: string } }): void {
  const key = `${obj.apiVersion}/${obj.kind}`;
  const model = models.get(key);
  if (!model) throw new Error(`no schema for ${key} (${obj.metadata?.name}): add it to test/chart/validate.ts`);
  try {
    new model(obj as never).validate();
  } catch (err) {
    const details = (err as { errors?: { instancePath: string; message: string }[] }).errors?.map((e) => `${e.instancePath} ${e.message}`).join('; ');
    throw new Error(`${key} ${obj.metadata?.name} is invalid: ${details ?? String(err)}`, { cause: err });
  }
}
