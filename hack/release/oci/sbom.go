package oci

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// DebianPackage says which Debian package installed a file of the build
// machine, and its version; ok is false for a file no package owns.
type DebianPackage func(path string) (name, version string, ok bool)

// dpkgOwner asks the build machine's dpkg which package owns path. A
// machine without dpkg, or a file no package lists, gives ok false.
func dpkgOwner(path string) (string, string, bool) {
	out, err := exec.Command("dpkg-query", "-S", path).Output()
	if err != nil {
		return "", "", false
	}
	// "libc6:amd64: /lib/x86_64-linux-gnu/libc.so.6"
	pkg, _, ok := strings.Cut(strings.TrimSpace(string(out)), ": ")
	if !ok || strings.Contains(pkg, ",") {
		return "", "", false
	}
	v, err := exec.Command("dpkg-query", "-W", "-f", "${Version}", pkg).Output()
	if err != nil || len(v) == 0 {
		return "", "", false
	}
	return pkg, string(v), true
}

// SBOM is the CycloneDX bill of materials of img, built from s: the image
// itself (name, version, digest), its binary (with the Go toolchain and
// every Go module its build information names) and each file the base
// layer took from the build machine, as the Debian package that installed
// it (name and version) or, for a file no package owns, the file with its
// SHA-256.
func SBOM(s Spec, m Meta, h Host, base *Tree, img v1.Image, ref string) (*cdx.BOM, error) {
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
	owner := h.Package
	if owner == nil {
		owner = func(string) (string, string, bool) { return "", "", false }
	}
	packages := map[string]bool{}
	for _, f := range base.HostFiles() {
		if name, version, ok := owner(f); ok {
			if packages[name] {
				continue
			}
			packages[name] = true
			pkg, arch, _ := strings.Cut(name, ":")
			purl := fmt.Sprintf("pkg:deb/debian/%s@%s", pkg, version)
			if arch != "" {
				purl += "?arch=" + arch
			}
			comps = append(comps, cdx.Component{Type: cdx.ComponentTypeLibrary, Name: pkg, Version: version, PackageURL: purl,
				Properties: &[]cdx.Property{{Name: "rota:from-build-machine", Value: f}}})
			continue
		}
		data, err := os.ReadFile(filepath.Join(h.Root, f))
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(data)
		comps = append(comps, cdx.Component{Type: cdx.ComponentTypeFile, Name: f,
			Hashes:     &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: hex.EncodeToString(sum[:])}},
			Properties: &[]cdx.Property{{Name: "rota:from-build-machine", Value: f}}})
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
