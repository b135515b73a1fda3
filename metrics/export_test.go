package metrics

// RelPath is relPath, for the tests of package metrics_test.
func (in *Input) RelPath(f *File) string { return in.relPath(f) }
