/**
 * Reading what the metrics port answers (Prometheus text or OpenMetrics) in assertions. A series
 * the exposition does not hold reads as undefined, never as 0: a caller that expects the series
 * asserts it, and one that counts a missing series as zero writes `?? 0`.
 */

export interface Sample {
  /** The series' name as exposed, suffix included (`…_bucket`, `…_count`). */
  name: string;
  labels: Record<string, string>;
  value: number;
  /** What follows the value on its line: a timestamp, or an OpenMetrics exemplar (` # {trace_id="…"} 0.01 1.7e9`). */
  rest: string;
}

const SAMPLE_LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*?)\})? (\S+)(.*)$/;

export async function scrape(metricsUrl: string): Promise<string> {
  return (await fetch(metricsUrl)).text();
}

/** Every sample of the series named `name` (exactly: `x_count` is a name of its own), in exposition order. */
export function samples(exposition: string, name: string): Sample[] {
  return exposition.split('\n').flatMap((line) => {
    const match = SAMPLE_LINE.exec(line);
    if (match?.[1] !== name) return [];
    const labels: Record<string, string> = {};
    for (const [, key = '', value = ''] of (match[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)) labels[key] = value;
    return [{ name, labels, value: Number(match[3]), rest: match[4] ?? '' }];
  });
}

/** The value of the sample of `name` whose labels are exactly `labels` (none by default), or undefined when there is no such series. */
export function sampleValue(exposition: string, name: string, labels: Record<string, string> = {}): number | undefined {
  const wanted = Object.entries(labels);
  return samples(exposition, name).find(
    (sample) => Object.keys(sample.labels).length === wanted.length && wanted.every(([key, value]) => sample.labels[key] === value),
  )?.value;
}

/** How many requests http_server_request_duration_seconds counted for one method, route and status, or undefined when it has no such series. */
export function requestCount(exposition: string, method: string, route: string, status: number): number | undefined {
  return sampleValue(exposition, 'http_server_request_duration_seconds_count', {
    http_request_method: method,
    http_route: route,
    http_response_status_code: String(status),
  });
}
