module tidegate.test/openfeature-go

go 1.26.0

require (
	github.com/open-feature/go-sdk v1.20.0
	github.com/open-feature/go-sdk-contrib/providers/ofrep v0.1.7
)

require go.uber.org/mock v0.6.0 // indirect
