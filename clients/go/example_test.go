package tidegate_test

import (
	"fmt"
	"net/http"
	"os"

	tidegate "github.com/tidegate/tidegate/clients/go"
)

// The README's five lines (compiled by go vet and go test; not run: it needs a coordinator).
func Example() {
	router, err := tidegate.Connect("http://tidegate-1:8080,http://tidegate-2:8080",
		tidegate.Identity{SubscriberID: "orders-az-a-7", Zone: "az-a", Kind: "service"},
		tidegate.Options{Token: os.Getenv("TIDEGATE_SERVICE_TOKEN"), CachePath: "/var/lib/orders/tidegate.json"})
	if err != nil {
		panic(err)
	}
	tag, err := router.Tag("user-42")
	fmt.Println(tag.Lane, tag.Zone, err)
	fmt.Println(router.Status())

	// A write handler: checked inside a write scope, forwarded once, or refused.
	mw := &tidegate.Middleware{Router: router, LocalZone: "az-a"}
	http.Handle("/orders", mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
}
