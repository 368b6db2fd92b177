package oci

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"runtime"
	"slices"
	"strings"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// SBOM is the CycloneDX bill of materials of img, built from s: the image
// itself (name, version, digest), its binary (with the Go toolchain and
// every Go module its build information names) and each pinned Debian
// package the base layer took files from (name, version, package URL and
// the .deb's SHA-256).
func SBOM(s Spec, m Meta, debs []Pin, img v1.Image, ref string) (*cdx.BOM, error) {
	tag, err := name.NewTag(ref)
	if err != nil {
		return nil, fmt.Errorf("image name %q: %w", ref, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return nil, err
	}
	bin, err := os.ReadFile(s.Binary)
	if err != nil {
		return nil, err
	}
	info, err := buildinfo.ReadFile(s.Binary)
	if err != nil {
		return nil, fmt.Errorf("%s: Go build information: %w", s.Binary, err)
	}
	bom := cdx.NewBOM()
	bom.SerialNumber = "urn:uuid:" + uuidFrom(digest.Hex)
	bom.Metadata = &cdx.Metadata{
		Timestamp: m.Created.UTC().Truncate(time.Second).Format(time.RFC3339),
		Tools: &cdx.ToolsChoice{Components: &[]cdx.Component{{
			Type: cdx.ComponentTypeApplication, Name: "rota hack/release", Version: m.Version,
		}}},
		Component: &cdx.Component{
			BOMRef: ref + "@" + digest.String(), Type: cdx.ComponentTypeContainer,
			Name: ref, Version: m.Version, Description: s.Description,
			Hashes:     &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: digest.Hex}},
			PackageURL: ociPURL(tag.Context(), digest),
		},
	}
	sum := sha256.Sum256(bin)
	comps := []cdx.Component{{
		BOMRef: "/" + s.Name, Type: cdx.ComponentTypeApplication, Name: s.Name, Version: m.Version,
		Hashes: &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: hex.EncodeToString(sum[:])}},
		Properties: &[]cdx.Property{
			{Name: "rota:path", Value: "/" + s.Name},
			{Name: "rota:go-module", Value: info.Main.Path},
			{Name: "rota:vcs-revision", Value: m.Revision},
		},
	}, {
		Type: cdx.ComponentTypeLibrary, Name: "stdlib", Version: info.GoVersion,
		PackageURL: "pkg:golang/stdlib@" + strings.TrimPrefix(info.GoVersion, "go"),
	}}
	for _, d := range info.Deps {
		if d.Replace != nil {
			d = d.Replace
		}
		comps = append(comps, cdx.Component{
			Type: cdx.ComponentTypeLibrary, Name: d.Path, Version: d.Version,
			PackageURL: fmt.Sprintf("pkg:golang/%s@%s", d.Path, d.Version),
		})
	}
	for _, p := range debs {
		comps = append(comps, cdx.Component{
			BOMRef: p.PURL(), Type: cdx.ComponentTypeLibrary, Name: p.Name, Version: p.Version, PackageURL: p.PURL(),
			Hashes: &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: p.SHA256}},
		})
	}
	slices.SortStableFunc(comps[2:], func(a, b cdx.Component) int { return strings.Compare(a.Name, b.Name) })
	bom.Components = &comps
	bom.Metadata.Properties = &[]cdx.Property{{Name: "rota:goarch", Value: runtime.GOARCH}}
	return bom, nil
}

// ociPURL is the package URL of the image of repo with digest: pkg:oci/<name>@sha256%3A<hex>?repository_url=<repository>.
func ociPURL(repo name.Repository, digest v1.Hash) string {
	return fmt.Sprintf("pkg:oci/%s@%s%%3A%s?repository_url=%s", path.Base(repo.RepositoryStr()), digest.Algorithm, digest.Hex, repo.Name())
}

// uuidFrom shapes the first 32 hex digits of a digest as a UUID, so that
// the same image always gets the same serial number.
func uuidFrom(h string) string {
	h = (h + strings.Repeat("0", 32))[:32]
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// WriteSBOM writes bom as CycloneDX 1.6 JSON to file.
func WriteSBOM(file string, bom *cdx.BOM) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	enc := cdx.NewBOMEncoder(f, cdx.BOMFileFormatJSON)
	enc.SetPretty(true)
	if err := enc.EncodeVersion(bom, cdx.SpecVersion1_6); err != nil {
		_ = f.Close()
		return fmt.Errorf("%s: %w", file, err)
	}
	return f.Close()
}
