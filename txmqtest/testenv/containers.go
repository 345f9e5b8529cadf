package testenv

import (
	"context"
	"sync"
	"time"
)

// containerStarters start a service in a container and return its endpoint. The map is empty
// unless the tests are built with the docker tag (containers_docker.go, which runs the docker
// command: no module requires a Docker client library), so the modules' users and this
// machine's CI never need Docker:
//
//	go test -tags docker ./...   # on a laptop with Docker and no local services
var containerStarters = map[string]func(ctx context.Context) (string, error){}

var (
	containersMu sync.Mutex
	containers   = map[string]containerResult{}
)

type containerResult struct {
	url string
	err error
}

// startContainerOnce starts the service's container once per process.
func startContainerOnce(service string, start func(context.Context) (string, error)) (string, error) {
	containersMu.Lock()
	defer containersMu.Unlock()
	if r, ok := containers[service]; ok {
		return r.url, r.err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	u, err := start(ctx)
	containers[service] = containerResult{u, err}
	return u, err
}
