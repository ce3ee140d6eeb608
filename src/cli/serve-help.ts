// `leadpost serve --help`: what serve reads from the environment. The README's table says more;
// a test checks that every variable the configuration reads is named both here and there.

export const SERVE_USAGE = `usage: leadpost serve [--roles api,projector,delivery]

Runs the service: HTTPS on PORT, plain HTTP on HTTP_PORT (answers 403 HTTPS_REQUIRED), the
projections and the webhook delivery worker. Stops on SIGTERM or SIGINT: stops accepting
connections, finishes requests in flight (up to 7 s), stops the workers, closes the stores,
exits 0, all within 10 s. SIGHUP reads the routing file and the TLS certificate again, without a
restart; an edit that does not load is logged and changes nothing.

--roles (or LEADPOST_ROLES; default all three) says what this process does, so that many API
instances can share one store: api serves the HTTP API; projector runs the projections, each
only while this process holds that projection's lease (projector-leads-v4 ...; the projector
processes share the four out), and delivery the webhook worker, only while this process holds
its lease; leases are kept in the read-model store (renewed every 1 s, lasting 3 s: another
process takes over within about 3 s of the holder's death, at once after a clean stop). Without api the listeners answer only /healthz,
/readyz and /metrics, which say which roles run and whether this process holds each lease.
With api and another role, the others run on a background thread of the process (its second
core), unless LEADPOST_BACKGROUND_THREAD=0; a thread that dies is started again. An empty
--roles (--roles=) is bad usage, not all three roles; LEADPOST_ROLES set empty is all three.

Configured by the environment; every variable is checked at start and a bad one stops serve
with a message naming it (exit 1):

  stores       LEADPOST_DATA_DIR (./data), EVENTSTORE_URL (esdb://…), MONGODB_URL (mongodb://…)
  encryption   LEADPOST_MASTER_KEY_FILE (<data dir>/master.key: 32 bytes, mode 0600, made on
               the first start; wraps the keys of personal data: back it up, apart from the data)
  roles        LEADPOST_ROLES (api,projector,delivery; --roles overrides it),
               LEADPOST_BACKGROUND_THREAD (1: projector and delivery beside api on a thread)
  retention    PII_RETENTION_DAYS (unset: keep; else leads older than this many days lose their
               personal data in the background, outcomes and reports stay)
  listeners    PORT (8443), HTTP_PORT (8080), HOST (all interfaces), TRUST_PROXY (0)
  TLS          TLS_CERT_FILE + TLS_KEY_FILE (PEM; else a self-signed one in the data dir)
  routing      LEADPOST_ROUTING_FILE (config/routing.json), LEADPOST_ROUTING_WATCH_SECONDS (unset:
               reloaded on SIGHUP only; else the file is looked at that often, reloaded on a change)
  requests     BODY_LIMIT_BYTES (65536), RATE_LIMIT_PER_SECOND (50; 0 = off),
               RATE_LIMIT_BURST (twice the rate), READ_RATE_LIMIT_PER_SECOND (20; 0 = off),
               READ_RATE_LIMIT_BURST (twice the rate), LEAD_ID_BLOCK_SIZE (100),
               HEADERS_TIMEOUT_MS (10000), REQUEST_TIMEOUT_MS (30000)
  pings        PING_TTL_SECONDS (300), PING_DEADLINE_MS (1000),
               PING_RATE_LIMIT_PER_SECOND (100; 0 = off), PING_RATE_LIMIT_BURST (twice the rate)
  verification CERTIFICATE_HOSTS (cert.trustedform.com,ping.trustedform.com), MX_LOOKUP (1),
               MX_TIMEOUT_MS (300; a mail route is cached 1 h, none 5 min, errors 30 s),
               MX_CANARY_DOMAIN (gmail.com; empty: trust every DNS answer),
               PHONE_REGIONS (US,CA,PR,VI,GU,AS,MP: the regions a mobile may be of),
               PHONE_VERIFIER_URL, EMAIL_VERIFIER_URL (unset: built-in checks)
  operations   READY_MAX_LAG_SECONDS (30), READY_APPEND_FAILURE_SECONDS (5), LOG_LEVEL (info),
               KEY_ROTATION_GRACE_SECONDS (86400)

Around the API: GET /healthz, /readyz, /metrics and /docs (the API reference).`;
