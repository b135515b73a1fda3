// Package metrics computes design metrics over the graph database the
// indexer writes, and states for every value how it was obtained.
//
// # Provenance
//
// Each metric is a Descriptor in one Registry: name, definition, kind,
// method id and version, scope, published source, the choices this
// implementation makes where the source leaves room, and known limits
// (`assay metrics explain METRIC` prints them). Each Value carries the
// metric, its kind — Measured, Proxy (an approximation, e.g. sampled
// betweenness) or Unavailable (NULL with a reason, never 0) —, the method,
// the scope and subject, the snapshot id, the build context (GOOS, GOARCH,
// CGO_ENABLED, tags: they decide which files exist), the subject's origin
// (production, test, generated, example) and package variant, and a
// coverage: the fraction (0..1) of the value's inputs that loaded without
// errors, 1 when they all did (the package itself for package-local
// values, every base package for afferent coupling and fan-in, the source
// file for complexity, the whole snapshot for betweenness; each
// Descriptor's Coverage says which). Coverage means that for every value,
// whatever its kind: an unavailable value whose inputs are complete (the
// abstractness of a package that declares no named types) has coverage 1,
// so coverage < 1 always means that something did not load.
//
// # Metrics
//
//	package  ca, ce, instability, abstractness, distance (Martin 1994),
//	         betweenness_imports (Brandes 2001)
//	type     lcom4 (Hitz & Montazeri 1995: the graph of the methods only),
//	         n_fields, n_unused_fields (the fields, counted apart)
//	func     cyclomatic, cyclomatic_folded (McCabe 1976), cognitive
//	         (Campbell 2017), fan_in, fan_out, dynamic_calls, call_scc_size,
//	         betweenness_calls (Brandes 2001)
//
// Complexity metrics measure the syntax of each indexed source file. In an
// index (Enrich) that is the indexer's tree of the bytes whose SHA-256 the
// file's row records; in Compute over a written database, and for a file
// with syntax errors, they re-parse the file and check its SHA-256 against the
// snapshot: a file changed since the index makes its functions' values
// unavailable rather than wrong. A file with syntax errors is measured on
// the tree go/parser recovers, its values with coverage 0 and a reason
// naming the file; a function it recovered no body for is unavailable.
//
// # Storage
//
// Enrich is the hook indexer.Options.Enrich takes: the values, computed
// from the graph in memory while the indexer inserts it, are written
// into the graph database (tables metric_descriptors, metric_value_rows
// and metric_context, read through the view metric_values, which has one
// row per value with every column of a Value; see Write) in the indexer's
// transaction, before its integrity check and SHA-256. Read returns them.
//
// Compute, Load and Read are safe for concurrent use on distinct inputs;
// an Input is read-only once loaded.
package metrics
