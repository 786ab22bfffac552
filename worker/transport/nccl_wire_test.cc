// The NCCL transport's header and rendezvous card, byte for byte (no GPU needed).
#include "worker/transport/nccl_wire.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace pipecoord::worker::nccl_wire {
namespace {

using kernels::DType;
using kernels::TensorSpec;

TEST(NcclWireTest, HeaderRoundTripsTagSpecAndBytes) {
  const MessageTag tag{kGradientChannel, 3, -5, 70000};
  for (const TensorSpec& spec : {TensorSpec{DType::kBF16, {2, 128, 256}}, TensorSpec{DType::kF32, {}},
                                 TensorSpec{DType::kI32, {0}}, TensorSpec{DType::kU8, {1, 2, 3, 4}}}) {
    const MessageHeader h = HeaderFor(tag, spec);
    EXPECT_EQ(h.spec, spec);
    EXPECT_EQ(h.bytes, spec.bytes());
    const HeaderBytes bytes = EncodeHeader(h);
    auto back = DecodeHeader(bytes);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, h) << kernels::ToString(spec);
  }
}

TEST(NcclWireTest, HeaderLayoutIsLittleEndianAtFixedOffsets) {
  const MessageHeader h = HeaderFor({0x01020304u, 0x05060708, -1, 9}, {DType::kBF16, {3, 5}});
  const HeaderBytes b = EncodeHeader(h);
  EXPECT_EQ(b[0], 'P');
  EXPECT_EQ(b[1], 'N');
  EXPECT_EQ(b[2], 'C');
  EXPECT_EQ(b[3], 'H');
  EXPECT_EQ(b[4], 1);  // version
  EXPECT_EQ(b[6], static_cast<uint8_t>(DType::kBF16));
  EXPECT_EQ(b[7], 2);  // dimensions
  EXPECT_EQ(b[8], 0x04);
  EXPECT_EQ(b[11], 0x01);
  EXPECT_EQ(b[12], 0x08);
  EXPECT_EQ(b[16], 0xFF);  // mb -1
  EXPECT_EQ(b[19], 0xFF);
  EXPECT_EQ(b[20], 9);
  EXPECT_EQ(b[24], 30);  // 3 * 5 * 2 bytes
  EXPECT_EQ(b[32], 3);
  EXPECT_EQ(b[40], 5);
  EXPECT_EQ(b[48], 0);  // unused dimensions are zero
}

TEST(NcclWireTest, ShapesOfMoreThanFourDimensionsTravelAsBytes) {
  const TensorSpec five{DType::kF32, {1, 2, 3, 4, 5}};
  const MessageHeader h = HeaderFor({}, five);
  EXPECT_EQ(h.spec, (TensorSpec{DType::kU8, {480}}));
  EXPECT_EQ(h.bytes, 480u);
  auto back = DecodeHeader(EncodeHeader(h));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->bytes, 480u);
}

TEST(NcclWireTest, DecodeRefusesWhatIsNotAHeaderOfThisVersion) {
  const HeaderBytes good = EncodeHeader(HeaderFor({1, 2, 3, 4}, {DType::kF32, {8}}));
  auto expect_internal = [](HeaderBytes b, const std::string& words) {
    auto r = DecodeHeader(b);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Code::kInternal);
    EXPECT_NE(r.status().message().find(words), std::string::npos) << r.status().message();
  };
  HeaderBytes b = good;
  b[0] = 'X';
  expect_internal(b, "bad magic");
  b = good;
  b[4] = 2;
  expect_internal(b, "version 2");
  b = good;
  b[6] = 9;
  expect_internal(b, "unknown dtype 9");
  b = good;
  b[7] = 5;
  expect_internal(b, "5 dimensions");
  b = good;
  b[24] = 33;  // 33 bytes announced for f32[8] (32 bytes)
  expect_internal(b, "does not have the announced 33 bytes");
  b = good;
  b[39] = 0x80;  // a negative dimension
  expect_internal(b, "dimension 0 is -");
  b = good;
  b[7] = 2;  // two dimensions of 2^40 each: the element count overflows
  b[32] = 0;
  b[37] = 1;
  b[45] = 1;
  expect_internal(b, "does not have the announced");
  auto short_read = DecodeHeader(std::span<const uint8_t>(good.data(), 63));
  EXPECT_EQ(short_read.status().code(), Code::kInternal);
}

DeviceIdentity Gpu(std::string host, std::string bus, std::string uuid) {
  return DeviceIdentity{std::move(host), std::move(bus), std::move(uuid), 0};
}

TEST(NcclWireTest, SameDeviceIsNcclsRuleOrTheSameUuid) {
  const std::string u1(16, '\x01'), u2(16, '\x02');
  // NCCL's rule: same host hash input and same PCI bus id (case does not matter).
  EXPECT_TRUE(SameDevice(Gpu("nodeA", "0000:65:00.0", u1), Gpu("nodeA", "0000:65:00.0", u2)));
  EXPECT_TRUE(SameDevice(Gpu("nodeA", "0000:AB:00.0", u1), Gpu("nodeA", "0000:ab:00.0", u2)));
  // One GPU seen from two containers with different host ids: the UUID still tells.
  EXPECT_TRUE(SameDevice(Gpu("ctr1", "0000:65:00.0", u1), Gpu("ctr2", "0000:65:00.0", u1)));
  // Two GPUs of one host; the same bus id on two hosts.
  EXPECT_FALSE(SameDevice(Gpu("nodeA", "0000:65:00.0", u1), Gpu("nodeA", "0000:66:00.0", u2)));
  EXPECT_FALSE(SameDevice(Gpu("nodeA", "0000:65:00.0", u1), Gpu("nodeB", "0000:65:00.0", u2)));
  // Unknown fields never match.
  EXPECT_FALSE(SameDevice(Gpu("", "", ""), Gpu("", "", "")));
}

TEST(NcclWireTest, DescribeNamesDeviceUuidBusAndHost) {
  std::string uuid;
  for (int i = 0; i < 16; ++i) uuid += static_cast<char>(i);
  DeviceIdentity d = Gpu("node7", "0000:65:00.0", uuid);
  d.device = 3;
  EXPECT_EQ(Describe(d), "cuda:3 GPU-00010203-0405-0607-0809-0a0b0c0d0e0f (PCI 0000:65:00.0) on host node7");
}

TEST(NcclWireTest, CardRoundTripsBinaryIds) {
  PairCard card;
  card.device = Gpu("host with spaces\nand a newline", "0000:65:00.0", std::string("\x00\xff\x10", 3));
  card.device.device = 7;
  card.low_to_high_id = std::string(128, '\0');
  card.high_to_low_id.clear();
  for (int i = 0; i < 128; ++i) card.high_to_low_id += static_cast<char>(255 - i);
  auto back = DecodeCard(EncodeCard(card));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, card);
  PairCard higher;  // the higher rank's card carries no ids
  higher.device = card.device;
  auto back2 = DecodeCard(EncodeCard(higher));
  ASSERT_TRUE(back2.ok());
  EXPECT_TRUE(back2->low_to_high_id.empty());
}

TEST(NcclWireTest, DecodeCardRefusesOtherValues) {
  const std::string good = EncodeCard(PairCard{Gpu("h", "b", "u"), "", ""});
  EXPECT_EQ(DecodeCard("").status().code(), Code::kInternal);
  EXPECT_EQ(DecodeCard("pipecoord-nccl-card v2\n").status().code(), Code::kInternal);
  std::string no_device = good;
  no_device.erase(no_device.find("device="), std::string("device=0\n").size());
  EXPECT_NE(DecodeCard(no_device).status().message().find("no field \"device\""), std::string::npos);
  std::string bad_hex = good;
  bad_hex.replace(bad_hex.find("host=") + 5, 2, "zz");
  EXPECT_NE(DecodeCard(bad_hex).status().message().find("\"host\" is not hex"), std::string::npos);
  std::string bad_int = good;
  bad_int.replace(bad_int.find("device=0"), 8, "device=0x");
  EXPECT_NE(DecodeCard(bad_int).status().message().find("not an integer"), std::string::npos);
}

TEST(NcclWireTest, CardKeysNameSessionPairAndPublisher) {
  EXPECT_EQ(CardKey(42, 1, 2, 1), "pipecoord/nccl/session-42/pair-1-2/rank-1");
  EXPECT_NE(CardKey(42, 1, 2, 1), CardKey(42, 1, 2, 2));
  EXPECT_NE(CardKey(42, 1, 2, 1), CardKey(43, 1, 2, 1));
  EXPECT_EQ(IdsKey(42, 1, 2), "pipecoord/nccl/session-42/pair-1-2/ids");
}

}  // namespace
}  // namespace pipecoord::worker::nccl_wire
