// A service that depends on the Go client the way a user of this repository does: it requires
// the client's module path and replaces it with the checkout's directory (a vendored checkout or
// a monorepo). scripts/client-go.sh builds and runs it; clients/go/README.md says how to depend on
// a released version instead (go get github.com/tidegate/tidegate/clients/go@v0.1.0).
module example.com/orders

go 1.26.0

require github.com/tidegate/tidegate/clients/go v0.1.0

require (
	github.com/klauspost/cpuid/v2 v2.2.10 // indirect
	github.com/open-feature/go-sdk v1.20.0 // indirect
	github.com/zeebo/xxh3 v1.1.0 // indirect
	go.uber.org/mock v0.6.0 // indirect
	golang.org/x/sys v0.30.0 // indirect
)

replace github.com/tidegate/tidegate/clients/go => ../../../clients/go
