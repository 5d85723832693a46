/* The server extension's routes (/workbench/api/): JSON requests and server-sent-event streams. */
import { PageConfig, URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

export interface IRunRow {
  name: string;
  status: 'running' | 'finished' | 'stopped' | 'failed' | string;
  step: number;
  total_steps: number | null;
  loss: number | null;
  model: string | null;
  precision: string | null;
  loss_scale: number | null;
  overflows: number;
  skipped_steps: number;
  loss_series: [number, number | null][];
  checkpoints: number;
  error: string | null;
}

export interface IRunsMessage {
  runs_dir: string;
  runs: IRunRow[];
  time?: number;
}

export interface IEventsMessage {
  events: { [key: string]: any }[];
  offset: number;
}

function url(path: string): string {
  const settings = ServerConnection.makeSettings();
  return URLExt.join(settings.baseUrl, 'workbench', 'api', path);
}

/** A JSON request; a 4xx/5xx answer throws an Error carrying the server's message. */
export async function requestAPI<T>(path: string, init: RequestInit = {}): Promise<T> {
  const settings = ServerConnection.makeSettings();
  const response = await ServerConnection.makeRequest(url(path), init, settings);
  const text = await response.text();
  const data = text ? JSON.parse(text) : {};
  if (!response.ok) {
    throw new Error(data.message || `${response.status} ${response.statusText}`);
  }
  return data as T;
}

/** An EventSource on a stream route (the token in the query: EventSource cannot send headers). It reconnects by
 * itself after a network error; close() ends it. */
export function openStream(
  path: string,
  handlers: { [event: string]: (data: any) => void },
  query: { [key: string]: string } = {}
): EventSource {
  const token = PageConfig.getToken();
  const params = new URLSearchParams(query);
  if (token) {
    params.set('token', token);
  }
  const qs = params.toString();
  const source = new EventSource(url(path) + (qs ? `?${qs}` : ''));
  for (const [event, handler] of Object.entries(handlers)) {
    source.addEventListener(event, (e: MessageEvent) => handler(JSON.parse(e.data)));
  }
  return source;
}
