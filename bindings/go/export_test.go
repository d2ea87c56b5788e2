package tq

// SetBeforeCall makes fn run just before each fallible C call (nil: no
// longer), for the tests of package tq_test.
func SetBeforeCall(fn func()) { testHookBeforeCall = fn }
