"""A runnable example: the tool an agent framework calls to send a message, on the Python client.

The tool's idempotency key is derived from the agent's run and the step
(never from the tool-call id, which changes when the framework retries a
turn), so a retried step is the same intent: one effect per logical step.
No model here: a scripted loop plays the framework and retries one turn
after "losing" its answer. Start the outbox with `make run`, paste its
export lines, then:

    python3 examples/agent-py/agent.py            # three steps, one message each
    python3 examples/agent-py/agent.py            # again: every step replays, nothing is sent twice
    RUN=other python3 examples/agent-py/agent.py  # a new run sends new messages

In your own agent: `pip install <path to>/clients/python` (or put it on
PYTHONPATH) and `import outbox_client`.
"""

import os
import sys
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))

from outbox_client import (  # noqa: E402
    Client,
    IdempotencyKeyReusedError,
    RetryError,
    ValidationError,
    base_url_from_env,
    key_for,
)

outbox = Client(base_url_from_env(), os.environ.get("OUTBOX_BOT_TOKEN") or "dev-bot-token")


def send_message(run_id: str, step: str, channel: str, text: str) -> dict:
    """Send `text` to `channel` once per (run_id, step); the tool an agent framework registers.

    Returns what the model reads: the outcome, never an exception for a
    refusal it can act on.
    """
    key = key_for("example-agent-py", run_id, step)
    body = {
        "kind": "reply", "provider": "sandbox", "account": "acct-1", "action": "send_message", "target": channel,
        "payload": {"text": text}, "grant": {"id": "dev-grant", "version": 1},
    }
    try:
        sub = outbox.submit_and_wait(body, key=key, interval=0.2, timeout=60)
    except IdempotencyKeyReusedError:
        return {"error": "idempotency_key_reused", "hint": "this step already sent another message: use a new step for a new message"}
    except ValidationError as e:
        return {"error": e.code, "field": e.field, "message": e.message}
    except RetryError as e:
        return {"error": "unavailable", "hint": f"the outbox could not be reached; call again with the same run and step (key {e.key})"}
    intent = sub.intent
    if intent["status"] == "needs-human":
        return {"status": "needs-human", "message": "the outcome is unknown and a human will decide; do not retry this step"}
    return {"status": intent["status"], "external_id": intent.get("externalId"), "replayed": sub.replayed, "intent_id": intent["id"]}


def main() -> None:
    run_id = os.environ.get("RUN") or "demo"
    steps = [("greet", "hello from the agent"), ("summary", "here is your summary"), ("bye", "goodbye")]
    for i, (step, text) in enumerate(steps):
        call_id = "call_" + uuid.uuid4().hex[:8]  # the framework's id: new on every call
        result = send_message(run_id, step, "chan-1", text)
        if i == 1:
            # The framework lost the answer and retries the turn with a new tool-call id.
            call_id = "call_" + uuid.uuid4().hex[:8]
            result = send_message(run_id, step, "chan-1", text)
        flag = "replayed" if result.get("replayed") else "sent"
        print(f"{run_id}/{step} ({call_id}): {result.get('status') or result.get('error')} {result.get('external_id') or ''} {flag}")


if __name__ == "__main__":
    main()
