//go:build testcontainers

package testenv

import (
	"context"
	"fmt"

	tc "github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// With the testcontainers tag, a service that does not answer locally is started in Docker once
// per test process; testcontainers' reaper removes the containers when the process exits.
func init() {
	containerStarters["PostgreSQL"] = func(ctx context.Context) (string, error) {
		hostPort, err := startContainer(ctx, tc.ContainerRequest{
			Image:        "postgres:15-alpine",
			Env:          map[string]string{"POSTGRES_HOST_AUTH_METHOD": "trust", "POSTGRES_DB": "test"},
			ExposedPorts: []string{"5432/tcp"},
			WaitingFor:   wait.ForLog("database system is ready to accept connections").WithOccurrence(2),
		}, "5432/tcp")
		return "postgres://postgres@" + hostPort + "/test?sslmode=disable", err
	}
	containerStarters["Redis"] = func(ctx context.Context) (string, error) {
		hostPort, err := startContainer(ctx, tc.ContainerRequest{
			Image:        "redis:7-alpine",
			ExposedPorts: []string{"6379/tcp"},
			WaitingFor:   wait.ForListeningPort("6379/tcp"),
		}, "6379/tcp")
		return "redis://" + hostPort + "/0", err
	}
	containerStarters["SQS"] = func(ctx context.Context) (string, error) {
		hostPort, err := startContainer(ctx, tc.ContainerRequest{
			Image:        "node:20-alpine",
			Cmd:          []string{"npx", "--yes", "fauxqs@1.9.2"},
			ExposedPorts: []string{"4566/tcp"},
			WaitingFor:   wait.ForHTTP("/health").WithPort("4566/tcp"),
		}, "4566/tcp")
		return "http://" + hostPort, err
	}
}

func startContainer(ctx context.Context, req tc.ContainerRequest, port string) (string, error) {
	c, err := tc.GenericContainer(ctx, tc.GenericContainerRequest{ContainerRequest: req, Started: true})
	if err != nil {
		return "", fmt.Errorf("starting %s: %w", req.Image, err)
	}
	hostPort, err := c.PortEndpoint(ctx, port, "")
	if err != nil {
		return "", fmt.Errorf("%s: port %s: %w", req.Image, port, err)
	}
	return hostPort, nil
}
