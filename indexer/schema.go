package indexer

// SchemaVersion is the version of the graph database schema this package
// writes. It is stored in snapshots.schema_version and PRAGMA user_version;
// readers compare it before querying.
const SchemaVersion = 4

// schemaDDL returns the statements that create the graph database. The
// package doc comment documents each table; keep the two in step.
//
// A CHECK that a column holds one of a few values is written
// "c = 'a' OR c = 'b'", not "c IN ('a', 'b')": the two accept the same
// values (NULL included), but SQLite (3.54) evaluates the IN list for
// every row of a multi-row INSERT at several times the cost
// (docs/performance.md).
func schemaDDL() []string {
	return []string{
		`CREATE TABLE snapshots (
			id                   TEXT PRIMARY KEY,
			schema_version       INTEGER NOT NULL,
			root_dir             TEXT NOT NULL,
			module_paths         TEXT NOT NULL,
			vcs_revision         TEXT,
			vcs_dirty            INTEGER,
			go_version           TEXT NOT NULL,
			goos                 TEXT NOT NULL,
			goarch               TEXT NOT NULL,
			cgo_enabled          TEXT NOT NULL,
			goflags              TEXT NOT NULL,
			tool_version         TEXT,
			tests                INTEGER NOT NULL,
			patterns             TEXT NOT NULL,
			packages             INTEGER NOT NULL,
			files                INTEGER NOT NULL,
			types                INTEGER NOT NULL,
			funcs                INTEGER NOT NULL,
			methods              INTEGER NOT NULL,
			imports              INTEGER NOT NULL,
			load_errors          INTEGER NOT NULL,
			packages_with_errors INTEGER NOT NULL,
			packages_ill_typed   INTEGER NOT NULL,
			unmatched_patterns   INTEGER NOT NULL,
			packages_matched     INTEGER NOT NULL,
			packages_ok          INTEGER NOT NULL,
			coverage             REAL NOT NULL CHECK (coverage >= 0 AND coverage <= 1),
			build_tags           TEXT NOT NULL,
			nodes                INTEGER NOT NULL,
			edges                INTEGER NOT NULL,
			input_key            TEXT NOT NULL,
			config_key           TEXT NOT NULL,
			incremental          INTEGER NOT NULL,
			reindexed            TEXT
		)`,
		`CREATE TABLE nodes (
			id         TEXT NOT NULL UNIQUE,
			kind       TEXT NOT NULL CHECK (kind = 'module' OR kind = 'package' OR kind = 'file' OR kind = 'type' OR kind = 'func' OR kind = 'method' OR kind = 'field' OR kind = 'interface_method' OR kind = 'closure'),
			name       TEXT,
			package_id TEXT REFERENCES nodes(id),
			file_id    TEXT REFERENCES nodes(id),
			start_line INTEGER,
			start_col  INTEGER,
			end_line   INTEGER,
			end_col    INTEGER,
			origin     TEXT NOT NULL CHECK (origin = 'production' OR origin = 'test' OR origin = 'generated' OR origin = 'example' OR origin = 'synthesized' OR origin = 'dependency'),
			object_path TEXT,
			seq        INTEGER PRIMARY KEY
		)`,
		`CREATE TABLE edge_rows (
			src     INTEGER NOT NULL REFERENCES nodes(seq),
			dst     INTEGER NOT NULL REFERENCES nodes(seq),
			kind    TEXT NOT NULL,
			variant TEXT NOT NULL,
			PRIMARY KEY (src, dst, kind)
		) WITHOUT ROWID`,
		`CREATE VIEW edges AS
			SELECT s.id AS src, d.id AS dst, e.kind AS kind, e.variant AS variant
			FROM edge_rows e JOIN nodes s ON s.seq = e.src JOIN nodes d ON d.seq = e.dst`,
		`CREATE TABLE packages (
			id             TEXT PRIMARY KEY REFERENCES nodes(id),
			go_id          TEXT NOT NULL UNIQUE,
			import_path    TEXT NOT NULL,
			name           TEXT,
			dir            TEXT,
			module_path    TEXT,
			module_version TEXT,
			module_dir     TEXT,
			module_main    INTEGER,
			variant        TEXT NOT NULL CHECK (variant = 'base' OR variant = 'test' OR variant = 'xtest' OR variant = 'test_dependency'),
			for_test       TEXT,
			ill_typed      INTEGER NOT NULL,
			error_count    INTEGER NOT NULL
		)`,
		`CREATE TABLE files (
			id          TEXT PRIMARY KEY REFERENCES nodes(id),
			package_id  TEXT NOT NULL REFERENCES packages(id),
			path        TEXT NOT NULL,
			rel_path    TEXT,
			name        TEXT NOT NULL,
			is_test     INTEGER NOT NULL,
			generated   INTEGER,
			synthesized INTEGER NOT NULL,
			compiled    INTEGER NOT NULL,
			indexed     INTEGER NOT NULL,
			sha256      TEXT,
			size_bytes  INTEGER,
			lines       INTEGER
		)`,
		`CREATE TABLE types (
			id          TEXT PRIMARY KEY REFERENCES nodes(id),
			package_id  TEXT NOT NULL REFERENCES packages(id),
			name        TEXT NOT NULL,
			type_kind   TEXT NOT NULL CHECK (type_kind = 'struct' OR type_kind = 'interface' OR type_kind = 'alias' OR type_kind = 'other' OR type_kind = 'unknown'),
			exported    INTEGER NOT NULL,
			type_params INTEGER NOT NULL,
			resolved    INTEGER NOT NULL
		)`,
		`CREATE TABLE funcs (
			id                 TEXT PRIMARY KEY REFERENCES nodes(id),
			package_id         TEXT NOT NULL REFERENCES packages(id),
			name               TEXT NOT NULL,
			is_method          INTEGER NOT NULL,
			receiver           TEXT,
			receiver_type_name TEXT,
			receiver_pointer   INTEGER,
			receiver_type_id   TEXT REFERENCES nodes(id),
			exported           INTEGER NOT NULL,
			type_params        INTEGER NOT NULL,
			signature          TEXT,
			resolved           INTEGER NOT NULL
		)`,
		`CREATE TABLE imports (
			package_id       TEXT NOT NULL REFERENCES packages(id),
			import_path      TEXT NOT NULL,
			imported_id      TEXT NOT NULL REFERENCES nodes(id),
			imported_indexed INTEGER NOT NULL,
			PRIMARY KEY (package_id, import_path)
		) WITHOUT ROWID`,
		`CREATE TABLE members (
			id         TEXT PRIMARY KEY REFERENCES nodes(id),
			type_id    TEXT NOT NULL REFERENCES types(id),
			package_id TEXT NOT NULL REFERENCES packages(id),
			name       TEXT NOT NULL,
			kind       TEXT NOT NULL CHECK (kind = 'field' OR kind = 'interface_method'),
			embedded   INTEGER NOT NULL,
			exported   INTEGER NOT NULL
		)`,
		`CREATE TABLE dynamic_calls (
			seq       INTEGER PRIMARY KEY,
			src       TEXT NOT NULL REFERENCES nodes(id),
			closure   TEXT REFERENCES nodes(id),
			mode      TEXT NOT NULL CHECK (mode = 'interface' OR mode = 'func_value'),
			target    TEXT REFERENCES nodes(id),
			expr      TEXT NOT NULL,
			signature TEXT,
			file_id   TEXT NOT NULL REFERENCES nodes(id),
			line      INTEGER NOT NULL,
			col       INTEGER NOT NULL,
			variant   TEXT NOT NULL
		)`,
		`CREATE TABLE load_errors (
			seq        INTEGER PRIMARY KEY,
			package_id TEXT REFERENCES packages(id),
			go_id      TEXT NOT NULL,
			kind       TEXT NOT NULL CHECK (kind = 'list' OR kind = 'parse' OR kind = 'type' OR kind = 'module' OR kind = 'file' OR kind = 'unknown' OR kind = 'excluded_by_build_context'),
			position   TEXT,
			file       TEXT,
			line       INTEGER,
			col        INTEGER,
			message    TEXT NOT NULL
		)`,
		`CREATE TABLE reuse_check (
			key        TEXT NOT NULL,
			check_json TEXT NOT NULL
		)`,
		`CREATE INDEX nodes_kind ON nodes(kind)`,
		`CREATE INDEX nodes_package ON nodes(package_id)`,
		`CREATE INDEX edge_rows_dst ON edge_rows(dst, kind)`,
		`CREATE INDEX load_errors_package ON load_errors(package_id)`,
		`CREATE INDEX nodes_file ON nodes(file_id)`,
		`CREATE INDEX members_type ON members(type_id)`,
		`CREATE INDEX dynamic_calls_src ON dynamic_calls(src)`,
	}
}
