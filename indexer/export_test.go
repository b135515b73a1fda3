package indexer

import "context"

// WithBeforeLoad returns opts with a function Index calls with its
// directory just before it loads the packages.
func WithBeforeLoad(opts Options, f func(dir string)) Options {
	opts.beforeLoad = f
	return opts
}

// ContextChange is contextChange for two contexts that differ in their
// root directory only.
func ContextChange(prevDir, curDir string) string {
	return contextChange(keyContext{Dir: prevDir}, keyContext{Dir: curDir})
}

// ReuseDecision runs Index with opts up to its reuse decision and returns
// that decision, loading and writing nothing: the previous snapshot
// (Reused set) when the database at opts.DBPath would be reused, otherwise
// a Snapshot whose FullReason says why Index would index (empty when there
// is no database to reuse). It takes the database's lock as Index does.
func ReuseDecision(ctx context.Context, opts Options) (Snapshot, error) {
	opts.decideOnly = true
	return Index(ctx, opts)
}
