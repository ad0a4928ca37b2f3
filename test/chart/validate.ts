// Validates rendered objects against the Kubernetes API schemas (kubernetes-models) and the
// Prometheus Operator and Gateway API CRD schemas. These check types, enums, formats and required
// fields; they do not reject unknown fields, which the chart's strict values.schema.json and the
// policy tests (reading the exact field paths) cover instead.
import { ConfigMap, Pod, Service, ServiceAccount } from 'kubernetes-models/v1';
import { Deployment } from 'kubernetes-models/apps/v1';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { Ingress, NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import { PodMonitor, PrometheusRule, ServiceMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1';
import { HTTPRoute } from '@kubernetes-models/gateway-api/gateway.networking.k8s.io/v1';

// Each model takes its own kind's type; the rendered object is checked by validate(), not by the compiler.
type Model = new (data: never) => { validate(): void };

const models: Record<string, Model> = {
  'v1/ConfigMap': ConfigMap,
  'v1/Pod': Pod,
  'v1/Service': Service,
  'v1/ServiceAccount': ServiceAccount,
  'apps/v1/Deployment': Deployment,
  'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'networking.k8s.io/v1/Ingress': Ingress,
  'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy,
  'monitoring.coreos.com/v1/ServiceMonitor': ServiceMonitor,
  'monitoring.coreos.com/v1/PodMonitor': PodMonitor,
  'monitoring.coreos.com/v1/PrometheusRule': PrometheusRule,
  'gateway.networking.k8s.io/v1/HTTPRoute': HTTPRoute,
};

/** Throws, naming the object and the failing field, unless the object is valid for its kind. */
export function validateObject(obj: { apiVersion?: string; kind?: string; metadata?: { name?: string } }): void {
  const key = `${obj.apiVersion}/${obj.kind}`;
  const model = models[key];
  if (!model) throw new Error(`no schema for ${key} (${obj.metadata?.name}): add it to test/chart/validate.ts`);
  try {
    new model(obj as never).validate();
  } catch (err) {
    const details = (err as { errors?: { instancePath: string; message: string }[] }).errors?.map((e) => `${e.instancePath} ${e.message}`).join('; ');
    throw new Error(`${key} ${obj.metadata?.name} is invalid: ${details ?? String(err)}`, { cause: err });
  }
}
