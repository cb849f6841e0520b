/**
 * Postgres LISTEN/NOTIFY transport (server mode). PgRunStore.append runs pg_notify inside the
 * append transaction, so a notification leaves exactly when the events are committed; this holds
 * one dedicated connection LISTENing and reconnects (telling followers to re-read) when it drops.
 */
import pg from "pg";
import { EVENTS_CHANNEL } from "../store/pg-event-log.js";
import { backoff, type SignalListener, type SignalTransport } from "./signals.js";

export class PgSignalTransport implements SignalTransport {
  readonly name = "postgres";
  private client: pg.Client | undefined;
  private closed = false;
  private attempt = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly url: string,
    private readonly schema: string,
  ) {}

  publish(): void {
    // the store's append transaction notifies on commit
  }

  async start(onSignal: SignalListener, onGap: () => void): Promise<void> {
    const connect = async (first: boolean): Promise<void> => {
      const client = new pg.Client({ connectionString: this.url });
      client.on("notification", (n) => {
        if (n.channel !== EVENTS_CHANNEL || !n.payload) return;
        try {
          const m = JSON.parse(n.payload) as { s: string; r: string; q: number };
          if (m.s === this.schema) onSignal(m.r, m.q);
        } catch {
          // not ours
        }
      });
      const retry = () => {
        if (this.closed || this.client !== client) return;
        this.client = undefined;
        client.end().catch(() => undefined);
        this.timer = setTimeout(() => void connect(false).catch(() => undefined), backoff(this.attempt++));
      };
      client.on("error", retry);
      client.on("end", retry);
      this.client = client;
      try {
        await client.connect();
        await client.query(`LISTEN ${EVENTS_CHANNEL}`);
        this.attempt = 0;
        if (!first) onGap();
      } catch (e) {
        if (first) {
          this.client = undefined;
          await client.end().catch(() => undefined);
          throw e;
        }
        retry();
      }
    };
    await connect(true);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    const c = this.client;
    this.client = undefined;
    await c?.end().catch(() => undefined);
  }
}
