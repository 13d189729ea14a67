// Command flux-push pushes a directory as an OCI artifact the way `flux push artifact`
// does (cmd/flux/push_artifact.go of flux2 v2.9.5): Flux's own client library, its default
// options, basic credentials, metadata of source and revision, the tarball layer. Only
// what the tests need of the command line is here; it prints the artifact's digest.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/fluxcd/pkg/oci"
	"github.com/google/go-containerregistry/pkg/crane"
	"github.com/google/go-containerregistry/pkg/name"
)

func main() {
	url := flag.String("url", "", "the artifact's address, HOST/NAME:TAG")
	path := flag.String("path", "", "the directory to push")
	source := flag.String("source", "", "the source address, e.g. the Git URL")
	revision := flag.String("revision", "", "the source revision")
	creds := flag.String("creds", "", "USERNAME:PASSWORD")
	insecure := flag.Bool("insecure-registry", false, "plain HTTP")
	flag.Parse()
	if err := push(*url, *path, *source, *revision, *creds, *insecure); err != nil {
		fmt.Fprintln(os.Stderr, "flux-push:", err)
		os.Exit(1)
	}
}

func push(url, path, source, revision, creds string, insecure bool) error {
	opts := oci.DefaultOptions()
	if creds != "" {
		authenticator, err := oci.GetAuthFromCredentials(creds)
		if err != nil {
			return err
		}
		opts = append(opts, crane.WithAuth(authenticator))
	}
	if insecure {
		opts = append(opts, crane.Insecure)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	meta := oci.Metadata{Source: source, Revision: revision, Annotations: map[string]string{}}
	digestURL, err := oci.NewClient(opts).Push(ctx, strings.TrimPrefix(url, "oci://"), path,
		oci.WithPushMetadata(meta))
	if err != nil {
		return fmt.Errorf("pushing artifact failed: %w", err)
	}
	digest, err := name.NewDigest(digestURL)
	if err != nil {
		return err
	}
	fmt.Println(digest.DigestStr())
	return nil
}
