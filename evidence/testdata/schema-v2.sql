-- Evidence store schema version 2, exactly as evidence/schema.go created it from commit d82ef18 until
-- schema v3 added the admissions chain. Tests build v2 fixture stores from it to exercise
-- `assay store migrate` from v2.
CREATE TABLE meta (
    key   VARCHAR PRIMARY KEY,
    value VARCHAR NOT NULL
);

CREATE TABLE writers (
    writer_id BIGINT PRIMARY KEY,
    pid       BIGINT NOT NULL,
    command   VARCHAR NOT NULL,
    host      VARCHAR NOT NULL,
    opened_at TIMESTAMP NOT NULL,
    closed_at TIMESTAMP
);

CREATE TABLE runs (
    run_id           VARCHAR PRIMARY KEY,
    ordinal          BIGINT NOT NULL UNIQUE,
    corrects_run_id  VARCHAR,
    status           VARCHAR NOT NULL CHECK (status IN ('open', 'finalized', 'interrupted')),
    envelope_digest  VARCHAR NOT NULL,
    created_at       TIMESTAMP NOT NULL,
    finalized_at     TIMESTAMP,
    event_count      BIGINT,
    terminal_hash    VARCHAR,
    writer_id        BIGINT,
    terminal_version INTEGER
);

CREATE TABLE run_status_changes (
    run_id      VARCHAR NOT NULL,
    ordinal     BIGINT NOT NULL,
    from_status VARCHAR NOT NULL,
    to_status   VARCHAR NOT NULL,
    reason      VARCHAR NOT NULL,
    writer_id   BIGINT NOT NULL,
    changed_at  TIMESTAMP NOT NULL,
    PRIMARY KEY (run_id, ordinal)
);

CREATE TABLE envelopes (
    run_id                  VARCHAR PRIMARY KEY,
    tenant                  VARCHAR NOT NULL,
    manifest_digest         VARCHAR NOT NULL,
    mode                    VARCHAR NOT NULL CHECK (mode IN ('live', 'dry_run', 'observe')),
    policy_digest           VARCHAR NOT NULL,
    dataset_digest          VARCHAR NOT NULL,
    environment_fingerprint VARCHAR NOT NULL,
    entropy_sources         VARCHAR[] NOT NULL,
    replay_tolerance        VARCHAR NOT NULL,
    provider                VARCHAR NOT NULL,
    base_url                VARCHAR NOT NULL,
    model                   VARCHAR NOT NULL,
    formation               VARCHAR NOT NULL,
    task_profile            VARCHAR NOT NULL,
    language                VARCHAR NOT NULL
);

CREATE TABLE events (
    run_id     VARCHAR NOT NULL,
    seq        BIGINT NOT NULL,
    parent     BIGINT NOT NULL,
    type       VARCHAR NOT NULL,
    member_id  VARCHAR NOT NULL,
    session_id VARCHAR NOT NULL,
    time       TIMESTAMP NOT NULL,
    payload    JSON NOT NULL,
    prev_hash  VARCHAR NOT NULL,
    hash       VARCHAR NOT NULL,
    PRIMARY KEY (run_id, seq)
);

CREATE TABLE artifacts (
    digest     VARCHAR PRIMARY KEY,
    size       BIGINT NOT NULL,
    storage    VARCHAR NOT NULL CHECK (storage IN ('inline', 'file')),
    data       BLOB,
    created_at TIMESTAMP NOT NULL
);

CREATE TABLE run_artifacts (
    run_id     VARCHAR NOT NULL,
    name       VARCHAR NOT NULL,
    digest     VARCHAR NOT NULL,
    media_type VARCHAR NOT NULL,
    linked_at  TIMESTAMP NOT NULL,
    PRIMARY KEY (run_id, name)
);

CREATE TABLE usage (
    run_id            VARCHAR NOT NULL,
    ordinal           BIGINT NOT NULL,
    member_id         VARCHAR NOT NULL,
    session_id        VARCHAR NOT NULL,
    source            VARCHAR NOT NULL CHECK (source IN ('wire', 'store', 'gateway')),
    state             VARCHAR NOT NULL CHECK (state IN ('reported', 'partial', 'unknown', 'suspect_zero')),
    requests          BIGINT NOT NULL,
    prompt_tokens     BIGINT,
    completion_tokens BIGINT,
    total_tokens      BIGINT,
    cached_tokens     BIGINT,
    reasoning_tokens  BIGINT,
    recorded_at       TIMESTAMP NOT NULL,
    PRIMARY KEY (run_id, ordinal)
);

CREATE TABLE usage_calls (
    run_id            VARCHAR NOT NULL,
    source            VARCHAR NOT NULL CHECK (source IN ('wire', 'store')),
    call_id           VARCHAR NOT NULL,
    observation       BIGINT NOT NULL,
    session_id        VARCHAR NOT NULL,
    member_id         VARCHAR NOT NULL,
    request_sha256    VARCHAR NOT NULL,
    messages          BIGINT,
    state             VARCHAR NOT NULL CHECK (state IN ('reported', 'partial', 'unknown', 'suspect_zero')),
    prompt_tokens     BIGINT,
    completion_tokens BIGINT,
    total_tokens      BIGINT,
    cached_tokens     BIGINT,
    reasoning_tokens  BIGINT,
    recorded_at       TIMESTAMP NOT NULL,
    PRIMARY KEY (run_id, source, call_id, observation)
);

CREATE TABLE usage_verdicts (
    run_id      VARCHAR NOT NULL,
    ordinal     BIGINT NOT NULL,
    member_id   VARCHAR NOT NULL,
    session_id  VARCHAR NOT NULL,
    verdict     VARCHAR NOT NULL CHECK (verdict IN ('conserved', 'mismatch', 'unknown')),
    deltas      JSON NOT NULL,
    detail      VARCHAR NOT NULL,
    recorded_at TIMESTAMP NOT NULL,
    duplicated  BOOLEAN NOT NULL DEFAULT false,
    multiple    BIGINT,
    sources     JSON,
    PRIMARY KEY (run_id, ordinal)
);

CREATE TABLE checks (
    run_id      VARCHAR NOT NULL,
    name        VARCHAR NOT NULL,
    required    BOOLEAN NOT NULL,
    status      VARCHAR NOT NULL CHECK (status IN ('passed', 'failed', 'unknown')),
    detail      VARCHAR NOT NULL,
    evidence    JSON,
    recorded_at TIMESTAMP NOT NULL,
    PRIMARY KEY (run_id, name)
);

CREATE TABLE verdicts (
    run_id            VARCHAR PRIMARY KEY,
    verdict           VARCHAR NOT NULL CHECK (verdict IN ('accepted', 'rejected', 'non_certifiable')),
    requested_verdict VARCHAR NOT NULL,
    reasons           VARCHAR[] NOT NULL,
    decided_at        TIMESTAMP NOT NULL
);

CREATE TABLE checkpoints (
    run_id     VARCHAR NOT NULL,
    seq        BIGINT NOT NULL,
    state      JSON NOT NULL,
    hash       VARCHAR NOT NULL,
    created_at TIMESTAMP NOT NULL,
    event_hash VARCHAR,
    PRIMARY KEY (run_id, seq)
);

