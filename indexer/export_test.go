package indexer

// SetTestHookBeforeLoad sets the function Index calls with its directory
// just before it loads the packages (nil removes it).
func SetTestHookBeforeLoad(f func(dir string)) {
	if f == nil {
		testHookBeforeLoad.Store(nil)
		return
	}
	testHookBeforeLoad.Store(&f)
}

// ConfigChange is configChange, for tests.
var ConfigChange = configChange
