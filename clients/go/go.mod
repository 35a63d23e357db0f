module github.com/tidegate/tidegate/clients/go

go 1.26.0

require (
	github.com/open-feature/go-sdk v1.20.0
	github.com/zeebo/xxh3 v1.1.0
)

require (
	github.com/klauspost/cpuid/v2 v2.2.10 // indirect
	go.uber.org/mock v0.6.0 // indirect
	golang.org/x/sys v0.30.0 // indirect
)
