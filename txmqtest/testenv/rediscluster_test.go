package testenv

import (
	"slices"
	"testing"
)

func TestRedisClusterAddrs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url     string
		want    []string
		wantErr bool
	}{
		{url: "redis+cluster://127.0.0.1:17000,127.0.0.1:17001/", want: []string{"127.0.0.1:17000", "127.0.0.1:17001"}},
		{url: "redis+cluster://:pw@a:7000/?txmq_prefix=x", want: []string{"a:7000"}},
		{url: "redis+cluster://a,b", want: []string{"a:6379", "b:6379"}},
		{url: "redis+cluster:///", wantErr: true},
		{url: "redis+cluster://a:7000,b", wantErr: true}, // Go's URL parser refuses it
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			t.Parallel()
			got, err := RedisClusterAddrs(tt.url)
			if (err != nil) != tt.wantErr {
				t.Fatalf("RedisClusterAddrs: %v; want error %v", err, tt.wantErr)
			}
			if !tt.wantErr && !slices.Equal(got, tt.want) {
				t.Fatalf("got %v; want %v", got, tt.want)
			}
		})
	}
}
