"""Settings with embedded defaults: SQLite, a filesystem Celery broker, the local compute backend.

Every value that differs between machines comes from the environment through ``portal.env``.
"""

from __future__ import annotations

from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from django.utils.translation import gettext_lazy as _

from portal.env import env_bool, env_decimal, env_int, env_list, env_networks, env_str

BASE_DIR = Path(__file__).resolve().parents[2]
DATA_DIR = Path(env_str("PORTAL_DATA_DIR", str(BASE_DIR / "var")))
DATA_DIR.mkdir(parents=True, exist_ok=True)

SECRET_KEY = env_str("DJANGO_SECRET_KEY", "dev-insecure-key-change-me-0123456789-abcdefghijklmnopqrstuvwxyz")
DEBUG = env_bool("DJANGO_DEBUG", True)
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])
SITE_URL = env_str("PORTAL_SITE_URL", "http://127.0.0.1:8000")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "django_celery_beat",
    "axes",
    "portal",
    "billing",
    "datasets",
    "instances",
    "portal.webhooks",
    "portal.marketplace",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "portal.middleware.RequestSanityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "portal.middleware.UserTimezoneMiddleware",
    # Axes must be last: it inspects the response of the login view.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "portal.urls"
WSGI_APPLICATION = "portal.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.i18n",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "portal.context_processors.console",
            ],
        },
    },
]

# --- database: DATABASE_URL selects PostgreSQL (or any dj-database-url URL), else SQLite -------------
_db_url = env_str("DATABASE_URL", "")
if _db_url:
    DATABASES = {"default": dj_database_url.parse(_db_url, conn_max_age=env_int("DB_CONN_MAX_AGE", 60))}
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": env_str("SQLITE_PATH", str(DATA_DIR / "portal.sqlite3")),
            # Wait for the writer lock instead of failing at once: the worker, beat and web share the file.
            # Write-ahead log: readers do not block the writer, and a commit is one fsync of the log
            # (synchronous=FULL keeps every commit durable) — https://www.sqlite.org/wal.html
            "OPTIONS": {
                "timeout": 20,
                "transaction_mode": "IMMEDIATE",
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL",
            },
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_USER_MODEL = "portal.User"
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

# django-axes: lock an (username, IP) pair out after AXES_FAILURE_LIMIT failed logins for AXES_COOLOFF.
AXES_FAILURE_LIMIT = env_int("AXES_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = env_int("AXES_COOLOFF_MINUTES", 15, minimum=1) / 60  # hours
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_USERNAME_FORM_FIELD = "username"  # the login form field (it holds the e-mail address)
AXES_LOCKOUT_TEMPLATE = "portal/lockout.html"

# --- i18n / time ---------------------------------------------------------------------------------------
LANGUAGE_CODE = "en"
LANGUAGES = [("en", _("English")), ("zh-hans", _("Simplified Chinese"))]
LOCALE_PATHS = [BASE_DIR / "portal" / "locale"]
FORMAT_MODULE_PATH = ["portal.formats"]  # zh_Hans: amounts grouped by thousands
USE_I18N = True
USE_TZ = True
TIME_ZONE = "UTC"  # storage; display uses the user's zone (default below)
PORTAL_DEFAULT_TIMEZONE = env_str("PORTAL_DEFAULT_TIMEZONE", "Asia/Shanghai")

STATIC_URL = "/static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
# The embedded run (runportal) serves without DEBUG (the product's own 404 page): WhiteNoise then serves the
# apps' static folders itself, no collectstatic needed; production serves the collected, hashed files only.
WHITENOISE_USE_FINDERS = True
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

# --- e-mail: console by default, SMTP when EMAIL_HOST is set --------------------------------------------
EMAIL_HOST = env_str("EMAIL_HOST", "")
if EMAIL_HOST:
    EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    EMAIL_PORT = env_int("EMAIL_PORT", 587)
    EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
    EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
    EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", True)
else:
    EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "gpu-portal <no-reply@gpu-portal.local>")
EMAIL_VERIFICATION_MAX_AGE_S = env_int("EMAIL_VERIFICATION_MAX_AGE_S", 3 * 24 * 3600, minimum=60)

# --- product rules -------------------------------------------------------------------------------------
CURRENCY = "CNY"
TRIAL_CREDIT = env_decimal("TRIAL_CREDIT", "10.00")  # CNY, granted once per verified e-mail address
TRIAL_CREDIT_DAYS = env_int("TRIAL_CREDIT_DAYS", 30, minimum=1)

# --- datasets: uploads are streamed to DATA_DIR/uploads/ and refused above this size (bytes) ---------------
DATASET_UPLOAD_MAX_BYTES = env_int("DATASET_UPLOAD_MAX_BYTES", 1024 * 1024 * 1024, minimum=1)

# --- REST API ------------------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "portal.api.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": [
        "portal.api.permissions.IsAuthenticatedThrottled",
        "portal.api.permissions.TokenScopePermission",
    ],
    "DEFAULT_THROTTLE_CLASSES": ["portal.api.throttling.TokenRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {
        "token": env_str("API_THROTTLE_RATE", "600/min"),
        "anon": env_str("API_ANON_THROTTLE_RATE", "120/min"),  # per IP: anonymous and bad-token requests
        "invoke": env_str("APP_INVOKE_RATE", "120/min"),  # app calls, per token
    },
    "DEFAULT_PAGINATION_CLASS": "portal.api.pagination.IdCursorPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "portal.api.errors.envelope_exception_handler",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": [
        "portal.api.parsers.StrictJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
}
SPECTACULAR_SETTINGS = {
    "TITLE": "gpu-portal partner API",
    "DESCRIPTION": "Wallet, datasets, GPU instances and training jobs. Authenticate with "
    "`Authorization: Bearer <token>` (create tokens in the console). Published models also answer the OpenAI "
    "API shape under `/api/v1/openai/v1` (point the `openai` client's `base_url` there; errors in OpenAI's shape).",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "SCHEMA_PATH_PREFIX": "/api/v1",
    "COMPONENT_SPLIT_REQUEST": True,
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "portal.api.schema.one_request_media_type",
        "portal.api.schema.document_errors",
    ],
    # Two apps have a field named "visibility" with different choices: name both enums explicitly.
    "ENUM_NAME_OVERRIDES": {
        "DatasetVisibilityEnum": "datasets.choices.Visibility",
        "AppVisibilityEnum": "portal.marketplace.choices.AppVisibility",
        "WebhookEventTypeEnum": "portal.webhooks.choices.EventType",
    },
    # One request media type per operation (JSON first): what the generated client (clients/python) sends.
}

CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
_cache_url = env_str("CACHE_URL", "")
if _cache_url:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": _cache_url}}

# --- Celery: a broker that needs no server by default (filesystem transport) ----------------------------
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "filesystem://")
_celery_dir = DATA_DIR / "celery"
CELERY_BROKER_TRANSPORT_OPTIONS = (
    {
        "data_folder_in": str(_celery_dir / "out"),
        "data_folder_out": str(_celery_dir / "out"),
        "processed_folder": str(_celery_dir / "processed"),
        "control_folder": str(_celery_dir / "control"),
        "store_processed": False,
        "polling_interval": 0.1,
    }
    if CELERY_BROKER_URL.startswith("filesystem")
    else {}
)
# kombu's filesystem transport lets a consumer read a message file before it is written (a worker then dies
# on an empty message); portal.broker writes each file under a temporary name and renames it into place.
CELERY_BROKER_TRANSPORT = "portal.broker:Transport" if CELERY_BROKER_URL.startswith("filesystem") else None
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True  # a task killed mid-run is redelivered; every task is idempotent
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
# Queues: control-plane work (inventory, scheduling, launch, reconcile, metering, budget guard, timers) runs on
# "control", which long work can never block; imports, upload stages and model exports run on "bulk";
# outgoing webhooks (network waits) on "webhooks". Production runs a worker per queue
# (README "Production"); runportal starts a control worker (control + webhooks) and a bulk worker.
CELERY_TASK_DEFAULT_QUEUE = "control"
BULK_TASKS = (
    "datasets.tasks.import_corpus",
    "datasets.tasks.upload_stage",
    "datasets.tasks.upload_deid_chunk",
    "portal.marketplace.tasks.app_version_build",
)
CELERY_TASK_ROUTES = {
    **{name: {"queue": "bulk"} for name in BULK_TASKS},
    "portal.webhooks.tasks.*": {"queue": "webhooks"},
}
CELERY_TIMEZONE = "UTC"
CELERY_BEAT_SCHEDULE = {
    "expire-credit-grants": {"task": "billing.tasks.expire_credit_grants", "schedule": 300.0},
    "instances-reconcile": {"task": "instances.tasks.reconcile", "schedule": 10.0},
    "instances-checkpoint-timers": {"task": "instances.tasks.checkpoint_timers", "schedule": 60.0},
    "instances-sync-inventory": {"task": "instances.tasks.sync_inventory", "schedule": 60.0},
}

# --- compute (instances app) -----------------------------------------------------------------------------
INSTANCES_BACKEND = env_str("INSTANCES_BACKEND", "local")  # "local" | "kubernetes"
INSTANCES_BACKEND_OPTIONS: dict[str, object] = (
    {
        "workspace_root": str(DATA_DIR / "workspaces"),
        "slots": env_int("INSTANCES_LOCAL_SLOTS", 2, minimum=1),
        # the folder first on PATH in every shell of an instance ("": the folder of the Python the portal runs)
        "training_bin": env_str("GPU_PORTAL_TRAINING_BIN", ""),
    }
    if INSTANCES_BACKEND == "local"
    else {"namespace": env_str("INSTANCES_K8S_NAMESPACE", "gpu-portal")}
)
INSTANCES_CHECKPOINT_ROOT = env_str("INSTANCES_CHECKPOINT_ROOT", str(DATA_DIR / "checkpoints"))
INSTANCES_DEFAULT_GPU_QUOTA = env_int("INSTANCES_DEFAULT_GPU_QUOTA", 1024, minimum=0)
INSTANCES_MIN_RUNWAY_MINUTES = env_int("INSTANCES_MIN_RUNWAY_MINUTES", 10, minimum=0)  # launch needs this much
INSTANCES_STOP_GRACE_S = env_int("INSTANCES_STOP_GRACE_S", 120, minimum=1)  # SIGTERM -> SIGKILL
INSTANCES_MAX_CRASH_RESUMES = env_int("INSTANCES_MAX_CRASH_RESUMES", 3, minimum=0)
INSTANCES_RESUME_BACKOFF_S = env_int("INSTANCES_RESUME_BACKOFF_S", 30, minimum=0)  # doubles per crash
INSTANCES_PREEMPT_RESUME_DELAY_S = env_int("INSTANCES_PREEMPT_RESUME_DELAY_S", 0, minimum=0)
# Persistent volumes (instances.interactive.volumes): local folders under this root, a quota of GB per organization
# (an organization's VolumeQuota row overrides it), the storage price when the price book has no row in force.
INSTANCES_VOLUMES_ROOT = env_str("INSTANCES_VOLUMES_ROOT", str(DATA_DIR / "volumes"))
INSTANCES_VOLUME_QUOTA_GB = env_int("INSTANCES_VOLUME_QUOTA_GB", 500, minimum=0)
VOLUME_PRICE_PER_GB_HOUR = env_str("VOLUME_PRICE_PER_GB_HOUR", "0.0005")  # CNY per GB-hour
CELERY_BEAT_SCHEDULE["instances-volumes-measure"] = {"task": "instances.tasks.volumes_measure", "schedule": 60.0}
# idle autostop of interactive instances: the warning (console + e-mail) comes this many minutes before the stop
# (half the limit when that is shorter); a utilization sample at or above these shares of one core / one card
# (processes of the instance on it) is work, not idleness.
INSTANCES_IDLE_WARNING_MINUTES = env_int("INSTANCES_IDLE_WARNING_MINUTES", 10, minimum=0)
INSTANCES_IDLE_CPU_PERCENT = env_int("INSTANCES_IDLE_CPU_PERCENT", 10, minimum=1)
INSTANCES_IDLE_GPU_PERCENT = env_int("INSTANCES_IDLE_GPU_PERCENT", 10, minimum=1)
# JupyterLab (instances.interactive.jupyter): which instance kinds get a server; on Kubernetes each instance's
# server is reached at <scheme>://i<id>.<domain>/ through an Ingress; a ticket from the portal lives this long.
INSTANCES_JUPYTER_KINDS = tuple(env_list("INSTANCES_JUPYTER_KINDS", ["interactive"]))
INSTANCES_JUPYTER_DOMAIN = env_str("INSTANCES_JUPYTER_DOMAIN", "")
INSTANCES_JUPYTER_SCHEME = env_str("INSTANCES_JUPYTER_SCHEME", "https")
INSTANCES_JUPYTER_TICKET_TTL_S = env_int("INSTANCES_JUPYTER_TICKET_TTL_S", 60, minimum=5)
# A JupyterLab server trusts the portal's "this user may still enter" this many seconds at most (access ends
# with membership within this delay even for a change the portal could not announce; instances.interactive.access).
INSTANCES_JUPYTER_RECHECK_S = env_int("INSTANCES_JUPYTER_RECHECK_S", 60, minimum=1)
if INSTANCES_JUPYTER_RECHECK_S > 600:
    raise ImproperlyConfigured("INSTANCES_JUPYTER_RECHECK_S: at most 600 seconds (access must end within minutes)")
# Who may enter instances: every live instance's authorized keys are compared with the rule this often (changes
# no signal announced, e.g. a queryset update of a membership).
CELERY_BEAT_SCHEDULE["instances-access-sweep"] = {"task": "instances.tasks.access_sweep", "schedule": 60.0}
# SSH (instances.interactive.ssh): the host and login name the instance page shows in its ssh command.
INSTANCES_SSH_ENABLED = env_bool("INSTANCES_SSH_ENABLED", True)
INSTANCES_SSH_HOST = env_str("INSTANCES_SSH_HOST", "127.0.0.1")
INSTANCES_SSH_USER = env_str("INSTANCES_SSH_USER", "")
# Utilization samples (instances.interactive.utilization): the pace and how many are kept per instance.
INSTANCES_UTILIZATION_EVERY_S = env_int("INSTANCES_UTILIZATION_EVERY_S", 30, minimum=1)
INSTANCES_UTILIZATION_KEEP = env_int("INSTANCES_UTILIZATION_KEEP", 120, minimum=1)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}

# --- Stripe: top-ups through Checkout, credited only by verified webhooks ------------------------------
STRIPE_SECRET_KEY = env_str("STRIPE_SECRET_KEY", "")
STRIPE_WEBHOOK_SECRET = env_str("STRIPE_WEBHOOK_SECRET", "")
STRIPE_API_BASE = env_str("STRIPE_API_BASE", "")  # only for a local stand-in in tests
STRIPE_WEBHOOK_TOLERANCE_S = env_int("STRIPE_WEBHOOK_TOLERANCE_S", 300, minimum=1)
# One deadline per attempt of a call to Stripe (seconds); a timeout leaves the outcome unknown (billing.stripe_gateway).
STRIPE_TIMEOUT_S = env_int("STRIPE_TIMEOUT_S", 30, minimum=1)
TOP_UP_MIN = env_decimal("TOP_UP_MIN", "10.00")
TOP_UP_MAX = env_decimal("TOP_UP_MAX", "100000.00")
TOP_UP_PRESETS = env_list("TOP_UP_PRESETS", ["50", "200", "1000", "5000"])

# --- metering and the budget guard ---------------------------------------------------------------------
METERING_LOOKBACK_HOURS = env_int("METERING_LOOKBACK_HOURS", 24, minimum=1)
BUDGET_GUARD_MINUTES = env_int("BUDGET_GUARD_MINUTES", 5, minimum=1)  # enough for a final checkpoint
LOW_BALANCE_THRESHOLDS = env_list("LOW_BALANCE_THRESHOLDS", ["50", "10"])  # CNY
CELERY_BEAT_SCHEDULE["metering-tick"] = {"task": "billing.tasks.metering_tick", "schedule": 60.0}
CELERY_BEAT_SCHEDULE["payment-reversals-sweep"] = {"task": "billing.tasks.payment_reversals_sweep", "schedule": 300.0}

# --- AI app marketplace ---------------------------------------------------------------------------------
APP_PUBLISHER_SHARE_BPS = env_int("APP_PUBLISHER_SHARE_BPS", 7000, minimum=0)  # 70 % to the publisher
APP_CALL_TIMEOUT_S = env_int("APP_CALL_TIMEOUT_S", 30, minimum=1)  # one deadline per call (portal.lib.egress)
APP_MAX_RESPONSE_BYTES = env_int("APP_MAX_RESPONSE_BYTES", 1024 * 1024, minimum=1024)  # an external endpoint's answer
APP_MAX_REQUEST_BYTES = env_int("APP_MAX_REQUEST_BYTES", 64 * 1024, minimum=1024)
# The most tokens one call is charged for at an app's price per 1,000 tokens (held while the call runs).
APP_MAX_BILLED_TOKENS = env_int("APP_MAX_BILLED_TOKENS", 4096, minimum=1)
# OpenAI-compatible streams (portal.marketplace.completions): while no token comes for this long the portal sends
# an SSE comment, so a client that went away is noticed (and the model server told) within two of them.
APP_STREAM_HEARTBEAT_MS = env_int("APP_STREAM_HEARTBEAT_MS", 100, minimum=10)
APP_MONTHLY_CAP_MICROS = env_int("APP_MONTHLY_CAP_CNY", 0, minimum=0) * 1_000_000  # 0 = no cap
APP_ALLOW_HTTP_ENDPOINTS = env_bool("APP_ALLOW_HTTP_ENDPOINTS", False)  # development only: lifts the address rule too
# Outgoing calls to URLs users give (webhooks, external app endpoints; portal.lib.egress): networks of the
# operator's own that may be called although not public (an on-premises receiver), and the CA bundle that
# their certificates are checked against (empty: certifi's).
OUTGOING_ALLOWED_NETWORKS = env_networks("OUTGOING_ALLOWED_NETWORKS")
OUTGOING_CA_BUNDLE = env_str("OUTGOING_CA_BUNDLE", "")
# Model servers of apps published from a checkpoint: "local" processes or a Kubernetes Deployment + Service,
# chosen like INSTANCES_BACKEND. On Kubernetes the exports under DATA_DIR/apps must lie on the claim
# APP_K8S_MODEL_CLAIM (mounted there on the workers; APP_K8S_MODEL_SUBPATH is that folder inside the claim).
APP_DEPLOYMENTS_BACKEND = env_str("APP_DEPLOYMENTS_BACKEND", INSTANCES_BACKEND)  # "local" | "kubernetes"
APP_DEPLOYMENTS_OPTIONS: dict[str, object] = (
    {}
    if APP_DEPLOYMENTS_BACKEND == "local"
    else {
        "namespace": env_str("APP_K8S_NAMESPACE", "gpu-portal-apps"),
        "image": env_str("APP_K8S_IMAGE", ""),
        "model_claim": env_str("APP_K8S_MODEL_CLAIM", ""),
        "model_subpath": env_str("APP_K8S_MODEL_SUBPATH", ""),
        # vLLM's OpenAI-compatible server (official image, GPUs) or "portal" (the training image's own server)
        "engine": env_str("APP_K8S_ENGINE", "vllm"),
        "vllm_image": env_str("APP_K8S_VLLM_IMAGE", ""),  # "" = instances.serving.kubernetes.VLLM_IMAGE
        "gpus": env_int("APP_K8S_GPUS", 1 if env_str("APP_K8S_ENGINE", "vllm") == "vllm" else 0, minimum=0),
    }
)
APP_SERVER_MAX_RESTARTS = env_int("APP_SERVER_MAX_RESTARTS", 3, minimum=1)  # failed in a row → "unhealthy"
CELERY_BEAT_SCHEDULE["marketplace-calls-release-stale"] = {
    "task": "portal.marketplace.tasks.app_calls_release_stale",
    "schedule": 60.0,
}
CELERY_BEAT_SCHEDULE["marketplace-deployments-health"] = {
    "task": "portal.marketplace.tasks.app_deployments_check",
    "schedule": 60.0,
}

# --- outgoing webhooks (portal.webhooks): endpoints are checked like app endpoints (APP_ALLOW_HTTP_ENDPOINTS) ---
# One deadline per attempt, from the claim to the end of the answer; a claim lasts longer (webhook_claim_lease).
WEBHOOK_TIMEOUT_S = env_int("WEBHOOK_TIMEOUT_S", 10, minimum=1)
WEBHOOK_RETRY_BASE_S = env_int("WEBHOOK_RETRY_BASE_S", 60, minimum=1)  # doubles per failed attempt
WEBHOOK_RETRY_MAX_DELAY_S = env_int("WEBHOOK_RETRY_MAX_DELAY_S", 6 * 3600, minimum=1)
WEBHOOK_RETRY_WINDOW_S = env_int("WEBHOOK_RETRY_WINDOW_S", 3 * 24 * 3600, minimum=60)  # then "failed"
WEBHOOK_SECRET_OVERLAP_S = env_int("WEBHOOK_SECRET_OVERLAP_S", 24 * 3600, minimum=0)  # old secret signs too
WEBHOOK_MAX_ENDPOINTS = env_int("WEBHOOK_MAX_ENDPOINTS", 16, minimum=1)  # per organization
CELERY_BEAT_SCHEDULE["webhooks-deliveries-sweep"] = {
    "task": "portal.webhooks.tasks.webhook_deliveries_sweep",
    "schedule": 30.0,
}
