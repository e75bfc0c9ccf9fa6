//go:build race

package twin

// raceBuild halves the tests' workloads under the race detector, which
// runs the simulator several times slower: the figures the tests check
// hold at either size.
const raceBuild = true
