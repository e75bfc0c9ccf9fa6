//go:build !race

package twin

const raceBuild = false
