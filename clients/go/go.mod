module keyholder/clients/go

// 1.19 is the Go of Debian 12 (golang-go); the client uses the standard library only, so no toolchain
// or module is ever downloaded (build with GOTOOLCHAIN=local on a newer Go).
go 1.19
