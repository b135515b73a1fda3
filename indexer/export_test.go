package indexer

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
