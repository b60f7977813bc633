/** The API base URL's variable, e.g. http://127.0.0.1:4000. */
export const ENV_API_URL = "OUTBOX_API_URL";
/** The local host's listen address (host:port), used when OUTBOX_API_URL is unset. */
export const ENV_HTTP_ADDR = "OUTBOX_HTTP_ADDR";
/** A bot's bearer token. */
export const ENV_BOT_TOKEN = "OUTBOX_BOT_TOKEN";
/** An operator's bearer token. */
export const ENV_OPERATOR_TOKEN = "OUTBOX_OPERATOR_TOKEN";
/** `make run`'s address when neither variable is set. */
export const DEFAULT_BASE_URL = "http://127.0.0.1:4000";

const trimRightSlash = (s: string) => s.replace(/\/+$/, "");

/**
 * The API base URL, read from the environment at call time as the Go
 * client's BaseURLFromEnv: $OUTBOX_API_URL (trimmed, without a trailing
 * "/"), else http://$OUTBOX_HTTP_ADDR, else http://127.0.0.1:4000. An empty
 * variable counts as unset.
 */
export function baseUrlFromEnv(env: Record<string, string | undefined> = process.env): string {
  const url = (env[ENV_API_URL] ?? "").trim();
  if (url !== "") return trimRightSlash(url);
  let addr = (env[ENV_HTTP_ADDR] ?? "").trim();
  if (addr !== "") {
    if (!addr.includes("://")) addr = "http://" + addr;
    return trimRightSlash(addr);
  }
  return DEFAULT_BASE_URL;
}
