"""Test-time views of a reader (satground/readers/views.py, `evaluate.views`)."""
import pytest
import torch
import torch.nn.functional as F

from satground.readers.digitcnn import DigitReader, deskew
from satground.harness.io import PipelineError
from satground.readers.lenet import LeNet
from satground.harness.params import compose, parse_params
from satground.readers.views import VIEW_COUNTS, VIEWS, ReaderViews, view


def digits(n=6, seed=0):
    """uint8 (n, 28, 28) blobs away from the border, so a small move loses no ink."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.zeros(n, 28, 28, dtype=torch.uint8)
    x[:, 6:22, 8:20] = torch.randint(0, 256, (n, 16, 12), generator=gen, dtype=torch.uint8)
    return x


def test_a_shift_view_moves_every_pixel_by_one_and_fills_zeros():
    x = torch.rand(3, 1, 28, 28)
    right = torch.zeros_like(x)
    right[..., 1:] = x[..., :-1]
    down = torch.zeros_like(x)
    down[..., 1:, :] = x[..., :-1, :]
    torch.testing.assert_close(view(x, 0.0, 1, 0), right, atol=1e-5, rtol=0)
    torch.testing.assert_close(view(x, 0.0, 0, 1), down, atol=1e-5, rtol=0)
    assert view(x, 0.0, 0, 0) is x


def test_a_rotation_view_turns_about_the_centre():
    """90 degrees maps pixel centres onto pixel centres: a quarter turn of the array, exactly;
    and the views' rotations are the small angles both ways."""
    x = torch.rand(2, 1, 28, 28)
    turned = view(x, 90.0, 0, 0)
    assert any(torch.allclose(turned, torch.rot90(x, k, dims=(2, 3)), atol=1e-5) for k in (1, 3))
    assert sorted(v[0] for v in VIEWS if v[0]) == [-6.0, 6.0]


def test_a_size_view_scales_about_the_centre():
    """A ramp across the columns, zero at the centre (13.5): the view's digit `size` times as
    large reads the ramp divided by size, wherever it samples inside the image (bilinear
    interpolation of a linear function is exact)."""
    ramp = (torch.arange(28.0) - 13.5).expand(1, 1, 28, 28)
    torch.testing.assert_close(view(ramp, 0.0, 0, 0, 1.06), ramp / 1.06, atol=1e-4, rtol=0)
    inner = (slice(None), slice(None), slice(2, -2), slice(2, -2))  # 0.94 samples past the border
    torch.testing.assert_close(view(ramp, 0.0, 0, 0, 0.94)[inner], (ramp / 0.94)[inner], atol=1e-4, rtol=0)
    assert sorted(v[3] for v in VIEWS if len(v) > 3) == [0.94, 1.06]


def test_nine_and_eleven_views_add_the_sizes_then_the_diagonal_shifts():
    torch.manual_seed(4)
    reader = LeNet(9).eval()
    x = digits().float().unsqueeze(1) / 255
    with torch.no_grad():
        def probs(*v):
            return F.softmax(reader(view(x, *v)), 1)
        seven = ReaderViews(reader, 7)(x).exp()
        nine = ReaderViews(reader, 9)(x).exp()
        eleven = ReaderViews(reader, 11)(x).exp()
        torch.testing.assert_close(nine, (7 * seven + probs(0.0, 0, 0, 0.94) + probs(0.0, 0, 0, 1.06)) / 9,
                                   atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(eleven, (9 * nine + probs(0.0, 1, 1) + probs(0.0, -1, -1)) / 11,
                                   atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("kind", ["cnn", "lenet"])
def test_one_view_is_the_readers_own_reading(kind):
    torch.manual_seed(0)
    reader = (DigitReader(9, n_nets=2, width=8, feature_dim=16) if kind == "cnn" else LeNet(9)).eval()
    images = digits()
    plain = F.log_softmax(reader(images), 1)
    torch.testing.assert_close(ReaderViews(reader, 1)(images), plain, atol=1e-5, rtol=1e-5)


def test_seven_views_average_each_net_over_the_moved_deskewed_images():
    """The mean over views and nets of each net's softmax on the deskewed image moved: built
    here by integer rolls of the padded deskewed image for the shifts, so it does not go through
    `view` for them."""
    torch.manual_seed(1)
    reader = DigitReader(9, n_nets=2, width=8, feature_dim=16).eval()
    images = digits()
    x = deskew(images)

    def moved(dx, dy):
        padded = F.pad(x, (2, 2, 2, 2))
        return torch.roll(padded, shifts=(dy, dx), dims=(2, 3))[..., 2:-2, 2:-2]

    copies = [x, moved(1, 0), moved(-1, 0), moved(0, 1), moved(0, -1), view(x, -6.0, 0, 0), view(x, 6.0, 0, 0)]
    with torch.no_grad():
        expected = torch.stack([F.softmax(net(c), 1) for net in reader.nets for c in copies]).mean(0)
        got = ReaderViews(reader, 7)(images).exp()
        five = ReaderViews(reader, 5)(images).exp()
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-4)
    assert not torch.allclose(five, got)  # the rotations count
    torch.testing.assert_close(got.sum(1), torch.ones(len(images)))


def test_a_reader_with_a_lenet_half_reads_it_in_views_too():
    torch.manual_seed(2)
    reader = DigitReader(9, n_nets=1, width=8, feature_dim=16, lenet=True).eval()
    images = digits()
    with torch.no_grad():
        cnn = ReaderViews(DigitReader(9, n_nets=1, width=8, feature_dim=16).eval(), 5)
        cnn.reader.nets.load_state_dict(reader.nets.state_dict())
        lenet = ReaderViews(reader.lenet, 5)
        expected = (cnn(images).exp() + lenet(images).exp()) / 2
        torch.testing.assert_close(ReaderViews(reader, 5)(images).exp(), expected, atol=1e-6, rtol=1e-5)


def test_a_merged_reader_read_in_views_gives_digits_summed_over_their_clusters():
    """Surjective grounding (`cluster.clusters` > 9): twelve clusters onto nine digits. The views
    must merge as the reader does: one view is its own reading, five a digit's summed clusters."""
    torch.manual_seed(3)
    merge = [4, 2, 7, 8, 0, 1, 3, 6, 6, 7, 5, 1]
    reader = DigitReader(9, n_nets=2, width=8, feature_dim=16, merge=merge).eval()
    images = digits()
    with torch.no_grad():
        torch.testing.assert_close(ReaderViews(reader, 1)(images), reader(images), atol=1e-5, rtol=1e-5)
        clusters = ReaderViews(DigitReader(12, n_nets=2, width=8, feature_dim=16).eval(), 5)
        clusters.reader.nets.load_state_dict(reader.nets.state_dict())
        expected = torch.zeros(len(images), 9).index_add(1, torch.tensor(merge), clusters(images).exp())
        got = ReaderViews(reader, 5)(images).exp()
    assert got.shape == (len(images), 9)
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-5)


def test_views_must_be_a_known_count():
    with pytest.raises(ValueError):
        ReaderViews(LeNet(9), 8)
    assert all(parse_params({"evaluate": {"views": n}}).evaluate.views == n for n in VIEW_COUNTS)
    with pytest.raises(PipelineError, match="evaluate.views"):
        parse_params({"evaluate": {"views": 3}})
    assert parse_params(compose("paper")).evaluate.views == 1  # the paper's reading


@pytest.mark.parametrize("kind", ["lenet", "cnn"])
def test_mirrored_views_read_an_image_and_its_mirror_image_alike(kind):
    """`evaluate.mirror`: the 7 views (closed under a mirror: the shifts left and right, the turns
    both ways) read in the image and its mirror image give one reading for an image and its
    mirror image, where the plain views give two; with the deskew too (a mirror turns its slant)."""
    torch.manual_seed(0)
    reader = (LeNet(9) if kind == "lenet" else DigitReader(9, n_nets=2, width=8)).eval()
    images = digits()
    mirrored = images.flip(-1)
    with torch.no_grad():
        for layer in ([reader.fc2] if kind == "lenet" else reader.output_layers()):
            layer.weight.mul_(50)  # a fresh net's readings are near uniform: make them differ
        plain = ReaderViews(reader, 7)
        both = ReaderViews(reader, 7, mirror=True)
        torch.testing.assert_close(both(images).exp(), both(mirrored).exp(), atol=2e-5, rtol=0)
        assert (plain(images).exp() - plain(mirrored).exp()).abs().max() > 1e-3
        expected = (plain(images).exp() + plain(mirrored).exp()) / 2  # half the readings each
        torch.testing.assert_close(both(images).exp(), expected, atol=1e-6, rtol=1e-5)


def test_mirror_needs_views_and_is_off_by_default():
    assert parse_params({}).evaluate.mirror is False
    assert parse_params({"evaluate": {"views": 5, "mirror": True}}).evaluate.mirror is True
    with pytest.raises(PipelineError, match="'evaluate.mirror' .* needs 'evaluate.views' > 1"):
        parse_params({"evaluate": {"views": 1, "mirror": True}})


@pytest.mark.parametrize("lenet", [False, True])
def test_readers_compute_on_their_inputs_device(lenet):
    """deskew, the views and a reader build their grids on the images' device (a CUDA run of the
    default once failed in ground: deskew's grids stayed on the CPU). The meta device stands in
    for a GPU: a tensor made on the CPU beside a meta one is refused as on CUDA."""
    images = torch.zeros(3, 28, 28, dtype=torch.uint8, device="meta")
    assert deskew(images).device.type == "meta"
    assert view(torch.zeros(3, 1, 28, 28, device="meta"), 6.0, 1, 0).device.type == "meta"
    reader = DigitReader(9, 2, lenet=lenet).to("meta")
    assert ReaderViews(reader, 7)(images).shape == (3, 9)
