package txmq_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/txmq/txmq"
)

// An app mounts its probes (GET /livez, GET /readyz) on its own mux, here under /health/.
func ExampleApp_HealthHandler() {
	ctx := context.Background()
	app, err := txmq.Open(ctx, &txmq.Config{Backend: "memory://"})
	if err != nil {
		panic(err)
	}
	defer app.Close(ctx)
	mux := http.NewServeMux()
	mux.Handle("/health/", http.StripPrefix("/health", app.HealthHandler(nil)))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, path := range []string{"/health/livez", "/health/readyz"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		fmt.Println(path, resp.StatusCode)
	}
	// Output:
	// /health/livez 200
	// /health/readyz 200
}
