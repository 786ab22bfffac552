#include "worker/transport/frame.h"

#include <gtest/gtest.h>

namespace pipecoord::worker {
namespace {

TEST(FrameTest, RoundTripsEveryField) {
  FrameHeader h;
  h.session = 0x0123456789abcdefULL;
  h.tag = MessageTag{7, -3, 11, 123456};
  h.payload_bytes = uint64_t{5} << 33;
  const FrameHeader d = DecodeHeader(EncodeHeader(h));
  EXPECT_EQ(d.magic, kFrameMagic);
  EXPECT_EQ(d.version, kFrameVersion);
  EXPECT_EQ(d.kind, static_cast<uint16_t>(FrameKind::kData));
  EXPECT_EQ(d.session, h.session);
  EXPECT_EQ(d.tag, h.tag);
  EXPECT_EQ(d.payload_bytes, h.payload_bytes);
}

TEST(FrameTest, LayoutIsLittleEndianAtDocumentedOffsets) {
  FrameHeader h;
  h.session = 0x1122334455667788ULL;
  h.tag = MessageTag{2, 3, 4, 5};
  h.payload_bytes = 0x0102;
  const HeaderBytes b = EncodeHeader(h);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(b.data()), 4), "PCTF");
  EXPECT_EQ(b[4], kFrameVersion);
  EXPECT_EQ(b[5], 0);
  EXPECT_EQ(b[6], static_cast<uint8_t>(FrameKind::kData));
  EXPECT_EQ(b[8], 0x88);
  EXPECT_EQ(b[15], 0x11);
  EXPECT_EQ(b[16], 2);
  EXPECT_EQ(b[20], 3);
  EXPECT_EQ(b[24], 4);
  EXPECT_EQ(b[28], 5);
  EXPECT_EQ(b[32], 0x02);
  EXPECT_EQ(b[33], 0x01);
  EXPECT_EQ(b[39], 0);
}

TEST(FrameTest, ValidAndInvalidHeaders) {
  FrameHeader ok;
  ok.payload_bytes = 1024;
  EXPECT_TRUE(ValidateHeader(ok, 1024).ok());

  FrameHeader h = ok;
  h.magic = 0xdeadbeef;
  Status s = ValidateHeader(h, 1024);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("bad magic 0xdeadbeef"), std::string::npos) << s.message();

  h = ok;
  h.version = 9;
  EXPECT_NE(ValidateHeader(h, 1024).message().find("version 9"), std::string::npos);

  h = ok;
  h.kind = 77;
  EXPECT_NE(ValidateHeader(h, 1024).message().find("kind 77"), std::string::npos);

  h = ok;
  h.payload_bytes = 1028;
  s = ValidateHeader(h, 1024);
  EXPECT_NE(s.message().find("1028 bytes exceeds the limit of 1024"), std::string::npos)
      << s.message();

  h = ok;
  h.payload_bytes = ~uint64_t{0};
  EXPECT_FALSE(ValidateHeader(h, uint64_t{1} << 30).ok());

  h = ok;
  h.payload_bytes = 6;  // three bf16 values: any byte count is a tensor of some dtype
  EXPECT_TRUE(ValidateHeader(h, 1024).ok());

  h = HelloFrame(1, 0, 1);
  EXPECT_TRUE(ValidateHeader(h, 0).ok());
  h.payload_bytes = 4;
  EXPECT_NE(ValidateHeader(h, 1024).message().find("expected none"), std::string::npos);
}

TEST(FrameTest, HandshakeFramesCarryRanks) {
  FrameHeader h = HelloFrame(42, 3, 5);
  EXPECT_EQ(h.kind, static_cast<uint16_t>(FrameKind::kHello));
  EXPECT_EQ(h.session, 42u);
  EXPECT_EQ(h.tag.stage, 3);
  EXPECT_EQ(h.tag.mb, 5);
  h = RefuseFrame(42, 5, RefuseReason::kSessionMismatch);
  EXPECT_EQ(h.tag.channel, static_cast<uint32_t>(RefuseReason::kSessionMismatch));
  EXPECT_STREQ(RefuseReasonName(h.tag.channel), "session mismatch");
  EXPECT_STREQ(RefuseReasonName(999), "unknown reason");
}

TEST(MessageTagTest, Prints) {
  EXPECT_EQ(ToString(MessageTag{1, 3, 5, 7}), "{channel 1, stage 3, mb 5, step 7}");
}

}  // namespace
}  // namespace pipecoord::worker
