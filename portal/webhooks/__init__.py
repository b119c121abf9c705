"""Outgoing webhooks for partners: an organization's owners and admins register HTTPS endpoints and pick event
types; every event of those types is POSTed to each endpoint, signed, retried and recorded.

Event types and their ``data`` (ids are integers, money in micro-CNY, times in the envelope as Unix seconds):

* ``instance.state_changed`` — ``{"instance_id", "name", "from", "to", "reason"}`` (statuses of
  ``instances.choices.InstanceStatus``), one per row of the instance's transition log.
* ``job.checkpoint_committed`` — ``{"job_id", "instance_id", "attempt", "step", "size_bytes", "loss"}``: a
  complete checkpoint was recorded.
* ``job.finished`` — ``{"job_id", "instance_id", "attempt"}``: the run exited successfully.
* ``job.failed`` — ``{"job_id", "instance_id", "attempt", "exit_code", "message"}``: the run crashed or could
  not be launched (``exit_code`` null); a training job within its crash budget resumes by itself
  (``job.resumed`` follows).
* ``job.preempted`` — ``{"job_id", "instance_id", "attempt", "message"}``: capacity was taken back (or its node
  lost); the job resumes by itself.
* ``job.resumed`` — ``{"job_id", "instance_id", "reason", "resume_step"}``: a resting job was queued again
  (automatic resume, restart or rollback; ``resume_step`` -1 = newest checkpoint).
* ``wallet.balance_low`` — ``{"balance_micros", "threshold_micros", "currency"}``: the balance fell below a
  ``LOW_BALANCE_THRESHOLDS`` threshold (once per crossing).
* ``wallet.top_up_credited`` — ``{"top_up_id", "amount_micros", "currency"}``: a Stripe top-up was credited
  (once per top-up).
* ``app_call.failed`` — ``{"call_id", "app", "error_code", "message"}``: an app call of the organization failed
  (nothing was charged).

``job_id`` is null for the command of an interactive instance (its ``job.*`` events concern the run).

A delivery is ``POST <endpoint url>`` with the JSON body
``{"id": "evt_…", "type": "<event type>", "created": <unix s>, "organization": "<slug>", "data": {…}}`` and
the headers ``Webhook-Id: evt_…`` (the same on every attempt and redelivery: receivers dedupe on it),
``Webhook-Event: <event type>`` and ``Webhook-Signature: t=<unix s>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>``
— Stripe's scheme, so ``stripe.WebhookSignature.verify_header(body, header, secret, 300)`` or any Stripe-style
helper verifies it. For 24 h after a secret is rotated the header carries two ``v1=`` entries (new and previous
secret); a receiver accepts the delivery when any entry matches its secret.

A complete 2xx answer within ``WEBHOOK_TIMEOUT_S`` — one deadline from the claim to the end of the answer's
first 500 bytes, lookup, connect, TLS and headers included — is a success; anything else (other status, a
redirect, which is never followed, no complete answer in time, a refused connection, an address the guard
refuses at this attempt: ``portal.lib.egress``) is a failed attempt, recorded as ``could not deliver: …`` in
words that do not tell an open port from a closed one, and retried with exponential backoff
(``WEBHOOK_RETRY_BASE_S`` × 2^(n-1), at most ``WEBHOOK_RETRY_MAX_DELAY_S``) until ``WEBHOOK_RETRY_WINDOW_S``
(3 days) have passed, then the delivery is ``failed``. Events and deliveries are rows written in the
transaction of the change they report; the sending task is enqueued after commit and a sweep (Celery beat)
sends whatever is due, so a receiver or broker that is down loses no event. Every attempt is recorded (time,
HTTP status, response time, error); the console page ``/o/<org>/webhooks/`` and ``/api/v1/webhooks/deliveries``
show them and redeliver.
"""
