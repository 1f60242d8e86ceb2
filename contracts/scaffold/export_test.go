package scaffold

// PatchAsSoleWriter is patchAsSoleWriter, for the tests of package
// scaffold_test, which run against the suite's API server.
var PatchAsSoleWriter = patchAsSoleWriter
